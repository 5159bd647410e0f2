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

# MT pretraining model (modeling_cove_mt.py)
from transformers import AutoModelForSeq2SeqLM  # noqa: E402

from .modeling_cove_mt import CoveForMachineTranslation  # noqa: E402

AutoModelForSeq2SeqLM.register(CoveConfig, CoveForMachineTranslation, exist_ok=True)

# BCN classification head (modeling_cove_bcn.py)
from transformers import AutoModelForSequenceClassification  # noqa: E402

from .modeling_cove_bcn import CoveForSequenceClassification  # noqa: E402

AutoModelForSequenceClassification.register(CoveConfig, CoveForSequenceClassification, exist_ok=True)

# DCN question-answering head (modeling_cove_dcn.py) and its pipeline (pipeline_cove.py): transformers 5.x blocks
# the name "question-answering" for local registration, so the pipeline is registered as "cove-question-answering"
# here; saved checkpoints carry it as `custom_pipelines` for pipeline("question-answering", ..., trust_remote_code=True).
from transformers import AutoModelForQuestionAnswering  # noqa: E402
from transformers.pipelines import PIPELINE_REGISTRY  # noqa: E402

from .modeling_cove_dcn import CoveForQuestionAnswering  # noqa: E402
from .pipeline_cove import CoveFeatureExtractionPipeline, CoveQuestionAnsweringPipeline  # noqa: E402

AutoModelForQuestionAnswering.register(CoveConfig, CoveForQuestionAnswering, exist_ok=True)
PIPELINE_REGISTRY.register_pipeline("cove-question-answering", pipeline_class=CoveQuestionAnsweringPipeline,
                                    pt_model=AutoModelForQuestionAnswering, type="text")
# feature extraction that sorts a list of texts by length (pipeline_cove.py); the stock "feature-extraction" stays
PIPELINE_REGISTRY.register_pipeline("cove-feature-extraction", pipeline_class=CoveFeatureExtractionPipeline,
                                    pt_model=AutoModel, type="text")

__all__ = ["CoveConfig", "CoveFeatureExtractionPipeline", "CoveForQuestionAnswering", "CoveQuestionAnsweringPipeline", "CoveForMachineTranslation", "CoveForSequenceClassification", "CoveModel", "CoveModelOutput", "CovePreTrainedModel"]
