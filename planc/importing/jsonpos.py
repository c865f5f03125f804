"""JSON read with the place of every value: `planc.sources.jsonpos`, where the stages
below the importer (a calibration file's reader) reach it too."""

from planc.sources.jsonpos import JsonSyntax, Node, parse

__all__ = ["JsonSyntax", "Node", "parse"]
