"""Train the support check (``support-check``) on the development split of HaluEval QA only.

A logistic regression over the lexical features of ``tracescore/scorers/_support_features.py``
(how much of the answer its context and question contain), fitted with scikit-learn on the
100 development answers of ``split.json`` (50 rows: the right answer labelled supported, the
hallucinated one not). The held-out split is never read here. Writes the model tracescore ships,
``tracescore/scorers/support_check.json``: the features' means and scales, the coefficients,
the intercept, and the cascade's band (below), with the development figures they came from.

The band: the faithfulness cascade trusts the check outside ``[low, high]`` and asks the judge
inside it. It is chosen on the check's cross-validated probabilities on the development split
(5 folds, a row's two answers in one fold, so no answer is scored by a model that saw its twin):
the narrowest band around 0.5 that holds ``--judge-share`` of the development answers (default
0.3: the judge is asked about the 30% the check is least sure of). The check's accuracy does not
rise much away from 0.5 on this data (its misses are confident ones: a hallucinated answer made
of the context's own words), so an accuracy target would not pick a band; a share of judge calls
is the knob a team trades against tokens.

scikit-learn is a benchmark-only dependency (tracescore scores with plain Python)::

    python -m venv /work/venvs/sklearn && /work/venvs/sklearn/bin/pip install "scikit-learn>=1.4,<2"
    /work/venvs/sklearn/bin/python benchmarks/judge_quality/train_support_check.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import sklearn
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, roc_auc_score
from sklearn.model_selection import GroupKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DATA = REPO / "examples" / "data" / "halueval_qa_200.jsonl"
FEATURES = REPO / "tracescore" / "scorers" / "_support_features.py"
OUT = REPO / "tracescore" / "scorers" / "support_check.json"


def load_features() -> object:
    """``_support_features`` loaded by path: no tracescore import (nor its dependencies)."""
    spec = importlib.util.spec_from_file_location("support_features", FEATURES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dev_set(module: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]
    dev = json.loads((HERE / "split.json").read_text(encoding="utf-8"))["dev"]
    x, y, groups = [], [], []
    for row in dev:
        data = rows[row]
        for key, label in (("right_answer", 1), ("hallucinated_answer", 0)):
            x.append(module.features(data[key], [data["knowledge"]], data["question"]))  # type: ignore[attr-defined]
            y.append(label)
            groups.append(row)
    return np.array(x), np.array(y), np.array(groups)


def band_for(prob: np.ndarray, share: float) -> tuple[float, float, int]:
    """The narrowest band ``[0.5 - d, 0.5 + d]`` (steps of 0.01) holding at least ``share`` of
    the development answers' cross-validated probabilities: the answers the cascade would send
    to the judge."""
    for step in range(0, 51):
        d = step / 100
        inside = int(((prob > 0.5 - d) & (prob < 0.5 + d)).sum())
        if inside >= share * len(prob):
            return round(0.5 - d, 2), round(0.5 + d, 2), inside
    return 0.0, 1.0, len(prob)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--judge-share", type=float, default=0.3,
                        help="share of the development answers the band holds (default 0.3)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    module = load_features()
    x, y, groups = dev_set(module)
    folds = GroupKFold(n_splits=5)
    best = None  # the regularisation with the best cross-validated accuracy, then log loss
    for c in (0.03, 0.1, 0.3, 1.0, 3.0):
        model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=1000))
        prob = cross_val_predict(model, x, y, groups=groups, cv=folds,
                                 method="predict_proba")[:, 1]
        accuracy = float(((prob >= 0.5) == (y == 1)).mean())
        auc = float(roc_auc_score(y, prob))
        loss = float(log_loss(y, prob))
        print(f"C={c}: CV log loss {loss:.3f}, accuracy {accuracy:.3f}, ROC-AUC {auc:.3f}")
        if best is None or (accuracy, -loss) > (best[3], -best[0]):
            best = (loss, c, auc, accuracy, prob)
    assert best is not None
    loss, c, auc, accuracy, prob = best
    low, high, inside = band_for(prob, args.judge_share)
    outside = (prob <= low) | (prob >= high)
    decided_right = float(((prob[outside] >= 0.5) == (y[outside] == 1)).mean()) \
        if outside.any() else None
    model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=1000)).fit(x, y)
    scaler, regression = model[0], model[1]
    out = {
        "model": "support-check",
        "version": 1,
        "features": list(module.FEATURE_NAMES),  # type: ignore[attr-defined]
        "mean": [round(float(v), 6) for v in scaler.mean_],
        "scale": [round(float(v), 6) for v in scaler.scale_],
        "coef": [round(float(v), 6) for v in regression.coef_[0]],
        "intercept": round(float(regression.intercept_[0]), 6),
        "band": [low, high],
        "trained_on": {
            "data": "HaluEval QA, development split of benchmarks/judge_quality/split.json",
            "answers": int(len(y)), "C": c, "sklearn": sklearn.__version__,
            "cv_log_loss": round(loss, 3), "cv_accuracy": round(accuracy, 3),
            "cv_roc_auc": round(auc, 3),
            "band_judge_share": args.judge_share, "cv_in_band": inside,
            "cv_decided_right": None if decided_right is None else round(decided_right, 3),
        },
    }
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
