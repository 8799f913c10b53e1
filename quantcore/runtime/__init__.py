"""Executors of IR graphs: float (numpy, for passes, calibration and bias correction), int8 (the
bit-exact CMSIS-NN reference kernels), and the IR's operators in torch (torch_ops: for quantization-aware
training and the gradient sensitivity)."""
