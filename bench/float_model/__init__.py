"""A float32 build of a network for the firmware benchmark's int8/float comparison (bench/firmware.py).

generate.py   a prepared FLOAT graph -> float_model.c/.h: plain-C NHWC float loops, one function per layer,
              weights as const float tables, activations in one static arena (quantcore.codegen.arena)
dequantize.py the float network of a quantized graph with no float model (ds_cnn_s): weights q * scale
build.py      the firmware: the float model + a float harness + the product's startup code, linker script
              and compiler flags, run under QEMU semihosting; its outputs checked against float_exec

Not part of the product: a baseline to measure CMSIS-NN's int8 kernels against.
"""
