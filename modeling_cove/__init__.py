"""modeling_cove: CoVe (McCann et al. 2017) for the Hugging Face ecosystem.

Importing this package registers the config, the base model, every head and the pipelines with the Auto classes.
The folder is flat with relative imports only, so it also ships unchanged as Hub remote code.
"""

from transformers import AutoConfig, AutoModel

from .configuration_cove import CoveConfig
from .modeling_cove import CoveModel, CoveModelOutput, CovePreTrainedModel

AutoConfig.register("cove", CoveConfig, exist_ok=True)
AutoModel.register(CoveConfig, CoveModel, exist_ok=True)

# --- heads: each head file registers itself here (one block per head) ---

__all__ = ["CoveConfig", "CoveModel", "CoveModelOutput", "CovePreTrainedModel"]
