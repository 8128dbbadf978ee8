"""A transformers config object from a config.json dict (the child side builds models from it).
"""

from __future__ import annotations


def hf_config_object(hf_config: dict):
    """A transformers config object from a config.json dict (keys transformers adds itself are dropped)."""
    import transformers as tf  # noqa: PLC0415

    cfg = dict(hf_config)
    return tf.AutoConfig.for_model(cfg.pop("model_type"), **{k: v for k, v in cfg.items()
                                                            if not k.startswith("_") and k != "architectures"})
