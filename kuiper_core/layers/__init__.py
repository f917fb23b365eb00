"""Layers, one file per family; each registers its PNNX types with @register."""

from .registry import Layer, create_layer, register, supported_types

__all__ = ["Layer", "create_layer", "register", "supported_types"]
