"""Pure-functional sequence-mixer ops (no parameters, no Flax). Shapes: B T H K V (docs/DESIGN.md)."""
from linear_seq.ops.attention import softmax_attention
from linear_seq.ops.attention_chunked import chunked_attention
from linear_seq.ops.feature_maps import FEATURE_MAPS, feature_map, random_projection
from linear_seq.ops.recurrence import MODES, linear_recurrence
from linear_seq.ops.linear_attention import gated_linear_attention, linear_attention, retention
from linear_seq.ops.signed_decay import signed_log_decay
from linear_seq.ops.delta import delta_rule
from linear_seq.ops.discretize import DISCRETIZE_METHODS, diagonalize, discretize, discretize_diagonal
from linear_seq.ops.ssm import SSM_CHANNEL_MODES, SSM_MODES, causal_conv_fft, ssm, ssm_diag_channels, ssm_kernel

__all__ = [
    "softmax_attention", "chunked_attention", "FEATURE_MAPS", "feature_map", "random_projection", "MODES",
    "linear_recurrence", "linear_attention", "retention", "gated_linear_attention", "discretize",
    "diagonalize", "SSM_MODES", "SSM_CHANNEL_MODES", "ssm", "ssm_kernel", "causal_conv_fft",
    "DISCRETIZE_METHODS", "discretize_diagonal", "ssm_diag_channels", "delta_rule",
    "signed_log_decay",
]
