"""modeling_cove: CoVe (McCann et al. 2017) for the Hugging Face ecosystem.

Importing this package registers the config, the base model, every head and the pipelines with the Auto classes.
The folder is flat with relative imports only, so it also ships as Hub remote code: `hub.py` names each class's
Auto class and the code files a checkpoint carries for it.
"""

import logging
import os

# OpenMP reads OMP_WAIT_POLICY once, when torch (imported below) loads it. Every command line of the package (console
# entry point, `python -m`, scripts/) imports this file before any torch import, so this is the variable's one home:
# PASSIVE unless the caller set it; "default" asks for OpenMP's own policy (docs/commands.md, "OpenMP").
if os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE").lower() == "default":
    del os.environ["OMP_WAIT_POLICY"]

import transformers  # noqa: E402
from transformers import AutoConfig, AutoModel
from transformers.pipelines import PIPELINE_REGISTRY

from .configuration_cove import CoveConfig
from .hub import MANIFEST, PIPELINES
from .modeling_cove import CoveModel, CoveModelOutput, CovePreTrainedModel
from .modeling_cove_bcn import CoveForSequenceClassification  # BCN classification head
from .modeling_cove_bilm import CoveForBidirectionalLM  # ELMo-style biLM pretraining model
from .modeling_cove_dcn import CoveForQuestionAnswering  # DCN question-answering head
from .modeling_cove_mt import CoveForMachineTranslation  # MT pretraining model
from .modeling_cove_tagger import CoveForTokenClassification  # sequence tagger (chunking, POS, NER; CVT's tagger)
from .pipeline_cove import (CoveFeatureExtractionPipeline, CoveQuestionAnsweringPipeline,
                            CoveTokenClassificationPipeline)


def _register_as_task(task: str, pipeline_class) -> None:
    """Register `pipeline_class` as the pipeline of transformers' own `task`, keeping the task's model classes,
    default model and type, without the registry's warning that the task was registered before (replacing its
    class is the point)."""
    stock = PIPELINE_REGISTRY.supported_tasks[task]
    registry_logger = logging.getLogger("transformers.pipelines.base")
    level = registry_logger.level
    registry_logger.setLevel(logging.ERROR)
    try:
        PIPELINE_REGISTRY.register_pipeline(task, pipeline_class=pipeline_class, pt_model=stock["pt"],
                                            default=stock.get("default"), type=stock.get("type"))
    finally:
        registry_logger.setLevel(level)


AutoConfig.register("cove", CoveConfig, exist_ok=True)
# each model class with the Auto class its checkpoints name in `auto_map` (hub.MANIFEST)
for model_class in (CoveModel, CoveForMachineTranslation, CoveForSequenceClassification, CoveForQuestionAnswering,
                    CoveForBidirectionalLM, CoveForTokenClassification):
    getattr(transformers, MANIFEST[model_class.__name__].auto_class).register(CoveConfig, model_class, exist_ok=True)

# transformers 5.x blocks the name "question-answering" for local registration, so the DCN's pipeline is registered
# as "cove-question-answering" here; saved DCN checkpoints carry it as `custom_pipelines` (hub.PIPELINES) for
# pipeline("question-answering", ..., trust_remote_code=True).
PIPELINE_REGISTRY.register_pipeline(
    "cove-question-answering", pipeline_class=CoveQuestionAnsweringPipeline,
    pt_model=getattr(transformers, PIPELINES["question-answering"].pt[0]), type=PIPELINES["question-answering"].type)
# the tagger's pipeline (word-level tokens, `word` as written), by the name it had first, and as the pipeline of the
# task "token-classification" (alias "ner") itself: transformers builds a task's registered class, and this one is
# transformers' own TokenClassificationPipeline for any model that is not a CoVe model (its `__new__`). The stock
# default model stays. Saved taggers still record it in `custom_pipelines` (for remote code); with the package
# imported, CoveConfig drops that entry on reading, so no trust_remote_code=True is asked (docs/tagging.md).
PIPELINE_REGISTRY.register_pipeline(
    "cove-token-classification", pipeline_class=CoveTokenClassificationPipeline,
    pt_model=getattr(transformers, PIPELINES["token-classification"].pt[0]),
    type=PIPELINES["token-classification"].type)
_register_as_task("token-classification", CoveTokenClassificationPipeline)
# feature extraction that sorts a list of texts by length (pipeline_cove.py); the stock "feature-extraction" stays
PIPELINE_REGISTRY.register_pipeline("cove-feature-extraction", pipeline_class=CoveFeatureExtractionPipeline,
                                    pt_model=AutoModel, type="text")

__all__ = ["CoveConfig", "CoveFeatureExtractionPipeline", "CoveForBidirectionalLM", "CoveForMachineTranslation",
           "CoveForQuestionAnswering", "CoveForSequenceClassification", "CoveForTokenClassification", "CoveModel",
           "CoveModelOutput", "CovePreTrainedModel", "CoveQuestionAnsweringPipeline", "CoveTokenClassificationPipeline"]
