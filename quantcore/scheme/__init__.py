"""The int8/int16 scheme's arithmetic (DOMAIN.md), below everything that computes with it: a range's
(scale, zero_point) (qparams), the weights', biases' and activations' integers (arith), a real multiplier
as CMSIS-NN's (multiplier, shift) (scaling), and what the recurrent kernels' executor and calibration read
of their scheme (recurrent). The executor (runtime), calibration and quantization all import it; it imports
only the IR and the error tree.
"""
