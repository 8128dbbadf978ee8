"""recommender.search.tpe: the TPESampler `tune` uses draws exactly what Optuna's own TPESampler draws (the same seed,
the same study), trial by trial - constraints (infeasible trials), pruned trials, define-by-run parameters and a
numerical one included - while it splits the history once per trial and looks each finished trial's categorical
values up once."""

import pytest

optuna = pytest.importorskip("optuna")

from recommender.search.tpe import supported, tpe_sampler  # noqa: E402


def _study(sampler, n_trials: int) -> list[tuple]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=sampler, direction="minimize")

    def objective(trial):  # tune's shape: a categorical whose name carries its choices, constraints per trial
        m = trial.suggest_categorical("model", ["a", "b", "c", "d"])
        qs = ["q4", "q8"] if m in ("a", "b") else ["q4", "q8", "f16"]
        q = trial.suggest_categorical(f"quant:{','.join(qs)}", qs)
        ctx = trial.suggest_categorical("context", [4096, 8192, 16384])
        kv = trial.suggest_categorical(f"kv:{q}", ["f16", "q8_0"] if q != "f16" else ["f16"])
        x = trial.suggest_float("x", 0.1, 10.0, log=True)  # a numerical parameter too
        cost = {"a": 3.0, "b": 1.0, "c": 2.0, "d": 0.5}[m] + {"q4": 0.1, "q8": 0.3, "f16": 0.6}[q] + ctx / 1e5 + x / 50
        mem = {"q4": 0.5, "q8": 1.0, "f16": 2.0}[q] * (2.0 if m == "d" else 1.0) + ctx / 32768 - 1.2
        trial.set_constraint("memory", mem)
        trial.set_constraint("other", -1.0 if kv == "f16" or m != "c" else 0.5)
        if trial.number % 7 == 3:
            raise optuna.TrialPruned()
        return cost

    study.optimize(objective, n_trials=n_trials)
    return [(t.number, t.state.name, t.params, t.value) for t in study.trials]


@pytest.mark.skipif(not supported(optuna), reason="this Optuna's TPESampler is not the shape tpe.py mirrors")
@pytest.mark.parametrize("constant_liar", [True, False])
def test_the_same_trials_as_optunas_tpe(constant_liar):
    kw = {"seed": 3, "n_startup_trials": 5, "multivariate": True, "constant_liar": constant_liar}
    stock = _study(optuna.samplers.TPESampler(**kw), 60)
    ours = tpe_sampler(optuna, **kw)
    assert type(ours) is not optuna.samplers.TPESampler  # the sampler with the per-trial split, not the fallback
    assert _study(ours, 60) == stock
    assert {s for _, s, _, _ in stock} == {"COMPLETE", "PRUNED"}
