"""Recurrent layers: nn.LSTM, nn.GRU, nn.RNN in the shapes pnnx writes them.

Each case wraps one recurrent module in `Seq`, which says which of the module's results the
model returns: pnnx drops unused outputs, so these cases cover full and partial output sets.
Where pnnx's generated *_pnnx.py reads a partial output set wrongly (it takes a lone h_n for
`output`, and drops the state input of an LSTM given (h, h)), the case keeps no operand
references: {"capture_operands": False}. An LSTM whose model uses (output, h_n) or (h_n, c_n)
but not all three is missing: the converter writes the .param, then crashes (SIGSEGV) writing
its *_pnnx.py.
"""

from __future__ import annotations

import torch
import torch.nn as nn

NO_OPERANDS = {"capture_operands": False}


class Seq(nn.Module):
    """Run `rnn`; return the results named in `returns` (from output, h_n, c_n)."""

    def __init__(self, rnn: nn.Module, returns: tuple[str, ...] = ("output", "h_n", "c_n"), shared_state: bool = False):
        super().__init__()
        self.rnn = rnn
        self.returns = returns
        self.shared_state = shared_state  # LSTM called with (h0, h0)

    def forward(self, x, *state):
        if isinstance(self.rnn, nn.LSTM) and state:
            state = ((state[0], state[0]) if self.shared_state else tuple(state),)
        y, hidden = self.rnn(x, *state)
        h, c = hidden if isinstance(hidden, tuple) else (hidden, None)
        named = {"output": y, "h_n": h, "c_n": c}
        results = tuple(named[r] for r in self.returns)
        return results[0] if len(results) == 1 else results


class Classifier(nn.Module):
    """The common pattern: an LSTM's last hidden state feeds a Linear."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(10, 16, num_layers=2, batch_first=True)
        self.fc = nn.Linear(16, 3)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return self.fc(h[-1])


def _x(T: int, B: int, F: int, batch_first: bool = False) -> torch.Tensor:
    return torch.randn(B, T, F) if batch_first else torch.randn(T, B, F)


CASES = {
    # LSTM
    "rnn_lstm_basic": lambda: (Seq(nn.LSTM(10, 16)), [_x(6, 2, 10)]),
    "rnn_lstm_bf_bidir_2l_state": lambda: (
        Seq(nn.LSTM(10, 12, num_layers=2, bidirectional=True, batch_first=True)),
        [_x(5, 3, 10, True), torch.randn(4, 3, 12), torch.randn(4, 3, 12)],
    ),
    "rnn_lstm_3l_nobias": lambda: (Seq(nn.LSTM(8, 12, num_layers=3, bias=False), ("output",)), [_x(7, 2, 8)]),
    "rnn_lstm_bidir_3l_bf": lambda: (
        Seq(nn.LSTM(6, 8, num_layers=3, bidirectional=True, batch_first=True), ("output",)),
        [_x(4, 2, 6, True)],
    ),
    "rnn_lstm_hn_only": lambda: (Seq(nn.LSTM(10, 16, num_layers=2), ("h_n",)), [_x(6, 2, 10)], NO_OPERANDS),
    "rnn_lstm_proj": lambda: (
        Seq(nn.LSTM(10, 16, num_layers=2, bidirectional=True, proj_size=6)),
        [_x(5, 2, 10)],
    ),
    "rnn_lstm_shared_state": lambda: (
        Seq(nn.LSTM(10, 16), shared_state=True),
        [_x(5, 2, 10), torch.randn(1, 2, 16)],
        NO_OPERANDS,
    ),
    "rnn_lstm_unbatched": lambda: (Seq(nn.LSTM(10, 16, bidirectional=True)), [torch.randn(6, 10)]),
    "rnn_lstm_classifier": lambda: (Classifier(), [_x(8, 3, 10, True)], NO_OPERANDS),
    # GRU
    "rnn_gru_basic": lambda: (Seq(nn.GRU(10, 16), ("output", "h_n")), [_x(6, 2, 10)]),
    "rnn_gru_bf_bidir_3l_state": lambda: (
        Seq(nn.GRU(10, 12, num_layers=3, bidirectional=True, batch_first=True), ("output", "h_n")),
        [_x(5, 3, 10, True), torch.randn(6, 3, 12)],
    ),
    "rnn_gru_nobias_2l": lambda: (Seq(nn.GRU(8, 12, num_layers=2, bias=False), ("output",)), [_x(7, 2, 8)]),
    "rnn_gru_hn_only": lambda: (Seq(nn.GRU(10, 16, num_layers=2), ("h_n",)), [_x(6, 2, 10)], NO_OPERANDS),
    "rnn_gru_unbatched_state": lambda: (
        Seq(nn.GRU(10, 16, bidirectional=True), ("output", "h_n")),
        [torch.randn(6, 10), torch.randn(2, 16)],
    ),
    # RNN
    "rnn_rnn_tanh": lambda: (Seq(nn.RNN(10, 16), ("output", "h_n")), [_x(6, 2, 10)]),
    "rnn_rnn_relu_bidir_2l_state": lambda: (
        Seq(nn.RNN(10, 12, num_layers=2, nonlinearity="relu", bidirectional=True, batch_first=True), ("output", "h_n")),
        [_x(5, 3, 10, True), torch.randn(4, 3, 12)],
    ),
}
