"""Writes a diffusers save_pretrained directory of a tiny program fixture's config with the
fixture's seeded weights (tools/make_fixtures.py PROGRAM_SEED), so that weft-run --model-dir on it
gives tests/fixtures/programs/<name>/outputs_*.safetensors.

usage: make_model_dir.py NAME OUT_DIR
"""
import json
import pathlib
import sys

TOOLS = pathlib.Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))


def main():
    import diffusers
    from diffusers_models import seeded_weights
    from make_fixtures import PROGRAM_SEED
    name, out = sys.argv[1], pathlib.Path(sys.argv[2])
    spec = json.loads((TOOLS / "model_configs" / (name + ".json")).read_text())
    cfg = dict(spec["config"])
    model = getattr(diffusers, cfg.pop("_class_name")).from_config(cfg).eval()
    seeded_weights(model, PROGRAM_SEED)
    model.save_pretrained(str(out))


if __name__ == "__main__":
    main()
