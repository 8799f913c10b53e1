"""Quantization-aware training: fake-quantized torch forward passes of the IR graph (fake_quant, on
quantcore.runtime.torch_ops), trained from the post-training quantization the pipeline makes (train); it
sits above the pipeline and verify, whose quantization and metrics it starts from and reports with."""
