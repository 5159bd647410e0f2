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

# BCN classification head (modeling_cove_bcn.py)
from transformers import AutoModelForSequenceClassification  # noqa: E402

from .modeling_cove_bcn import CoveForSequenceClassification  # noqa: E402

AutoModelForSequenceClassification.register(CoveConfig, CoveForSequenceClassification, exist_ok=True)

__all__ = ["CoveConfig", "CoveForSequenceClassification", "CoveModel", "CoveModelOutput", "CovePreTrainedModel"]
