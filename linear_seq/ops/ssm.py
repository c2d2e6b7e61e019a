"""Placeholder, being written."""
SSM_MODES = ("fft", "scan", "assoc")
def ssm(*a, **k): raise NotImplementedError
def ssm_kernel(*a, **k): raise NotImplementedError
def causal_conv_fft(*a, **k): raise NotImplementedError
