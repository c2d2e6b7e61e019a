"""DeltaProduct (Siems et al. 2025, "DeltaProduct: Improving State-Tracking in Linear RNNs via Householder
Products"): n_h delta-rule steps per token, so each token's transition is a product of n_h generalized
Householder matrices; the gated form (Gated DeltaProduct) decays the state once per token."""
from flax import nnx

from linear_seq.mixers import deltanet


class DeltaProduct(deltanet.DeltaNet):
  """DeltaNet (`mixers.DeltaNet`, same gates, β options, short conv, output norm and gate) with
  householder_steps = n_h ≥ 1 delta steps per token (default 2): token t writes n_h (k, v, β) triples, each
  from its own projection, with the gate α_t applied before the first and q_t read after the last
  (mixers/householder.py; fla's GatedDeltaProduct). Built on `ops.delta_rule` over the token axis expanded
  n_h times, so every mode, decoding and sequence parallelism are the op's. Costs about n_h times DeltaNet's
  op (T·n_h steps) plus the wider k, v, β projections; n_h = 1 is DeltaNet exactly.
  State: as DeltaNet's, with n = n_h.
  """

  def __init__(self, d_model: int, num_heads: int, *, householder_steps: int = 2, **kwargs):
    super().__init__(d_model, num_heads, householder_steps=householder_steps, **kwargs)

  @classmethod
  def from_config(cls, cfg, *, rngs: nnx.Rngs) -> "DeltaProduct":
    return cls(cfg.d_model, cfg.num_heads, householder_steps=cfg.householder_steps,
               **deltanet.config_options(cfg), rngs=rngs)
