"""The pnnx.Expression language: lexer -> parser (AST) -> reverse Polish -> evaluation.

from kuiper_core import expression as ex
ex.tokens("add(@0,1.0)")          # [Token(name,'add',0:3), Token((,'(',3:4), ...]
ast = ex.parse("mul(exp(neg(abs(@0))),3.0)")
ex.to_text(ast)                   # canonical text (== the input for canonical text)
ex.to_rpn(ast)                    # nodes in reverse Polish order
ex.evaluate(ast, [x])             # np.ndarray, PyTorch semantics
ex.evaluate_traced(ast, [x])      # every push/apply with the stack after it
ex.compile_plan(ast, [np.float32])  # the fast path used by the pnnx.Expression layer
"""

from .evaluate import (
    Plan,
    StackEntry,
    Step,
    Trace,
    TraceStep,
    VType,
    compile_plan,
    describe_value,
    evaluate,
    evaluate_traced,
    promote,
    type_of,
)
from .functions import BINARY_NAMES, CAST_NAMES, FUNCTIONS, UNARY_NAMES, Function
from .lexer import Kind, Token, tokenize, tokens
from .parser import (
    Call,
    Constant,
    ListExpr,
    Node,
    OperandRef,
    children,
    depth,
    inorder,
    parse,
    same_tree,
    span_text,
    to_text,
    walk,
)
from .rpn import label, rpn_text, to_rpn

trace = evaluate_traced

__all__ = [
    "BINARY_NAMES",
    "CAST_NAMES",
    "FUNCTIONS",
    "UNARY_NAMES",
    "Call",
    "Constant",
    "Function",
    "Kind",
    "ListExpr",
    "Node",
    "OperandRef",
    "Plan",
    "StackEntry",
    "Step",
    "Token",
    "Trace",
    "TraceStep",
    "VType",
    "children",
    "compile_plan",
    "depth",
    "describe_value",
    "evaluate",
    "evaluate_traced",
    "inorder",
    "label",
    "parse",
    "promote",
    "rpn_text",
    "same_tree",
    "span_text",
    "to_rpn",
    "to_text",
    "tokenize",
    "tokens",
    "trace",
    "type_of",
    "walk",
]
