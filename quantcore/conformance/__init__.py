"""Conformance: run the reference kernels on CMSIS-NN's own test vectors and compare byte for byte.

A vector directory holds `<kernel>/<case>.npz` (the arrays, named as in CMSIS-NN's C test data) and
`<kernel>/<case>.json` (`kernel`, `case`, `defines`, `arrays`). An adapter per CMSIS-NN kernel family wires a
case's defines and arrays into the reference kernel the same way CMSIS-NN's unit test wires them into C.
"""
