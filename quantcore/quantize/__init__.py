"""The int8 scheme: float scales to CMSIS-NN's integer parameters."""
