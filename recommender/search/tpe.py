"""Optuna's TPESampler with its trial bookkeeping done once per trial: the same samples, less time.

`tune` asks the sampler for 5-7 categorical parameters a trial (the model, its quant, the engine, context, batch, KV
dtype, GPU share). For each of them Optuna's TPESampler (optuna 5.1, ``samplers/_tpe/sampler.py``) splits the
whole history into its below and above groups again (``_split_trials``), reading each finished trial's constraints
from its system attributes on the way (``FrozenTrial.constraints``, a dict built anew per call: about 180,000 such
reads in 300 trials), and looks every trial's value of the parameter up in its choices again
(``_get_internal_repr``; ~200 models). Within one trial the history it splits is the same for every parameter (the
finished trials: the current one is left out; with --storage, as long as no other worker's trial is running), a
finished trial's constraints and values no longer change, and a name's choices are fixed within a study; so
:class:`TPESampler` here keeps the split for the trial at hand, each finished trial's infeasibility score by trial
id and its categorical values' positions by (trial id, name). Everything else - the Parzen estimators, the random
state, the order of the draws - is Optuna's own code, so a seeded study draws exactly what the stock sampler draws
(tests/search/test_tpe.py compares the two trial by trial). Measured: docs/benchmarks.md (issue 26).

The overridden methods are private ones of Optuna's; on an Optuna whose TPESampler does not have the shape this was
written against (``supported``), :func:`tpe_sampler` returns the stock sampler.
"""

from __future__ import annotations

from typing import Any

SUPPORTED_MAJOR = "5."  # the optuna releases whose TPESampler._sample this mirrors (5.0, 5.1)


def supported(optuna) -> bool:
    from optuna.samplers._tpe import sampler as tpe  # noqa: PLC0415

    return (optuna.__version__.startswith(SUPPORTED_MAJOR)
            and all(hasattr(tpe, f) for f in ("_split_complete_trials", "_split_pruned_trials",
                                               "_get_infeasible_trial_score", "default_gamma",
                                               "default_gamma_multiobjective"))
            and all(hasattr(tpe.TPESampler, m) for m in ("_sample", "_get_internal_repr", "_get_params",
                                                         "_build_parzen_estimator", "_compute_acquisition_func",
                                                         "_compare")))


def tpe_sampler(optuna, **kwargs: Any):
    """``optuna.samplers.TPESampler(**kwargs)``'s samples, from the sampler below where this Optuna has its shape."""
    if not supported(optuna):
        return optuna.samplers.TPESampler(**kwargs)
    return _sampler_class(optuna)(**kwargs)


_CLASS: dict[str, type] = {}


def _sampler_class(optuna) -> type:
    if "tpe" in _CLASS:
        return _CLASS["tpe"]
    import numpy as np  # noqa: PLC0415
    from optuna.distributions import CategoricalDistribution  # noqa: PLC0415
    from optuna.samplers._tpe import sampler as tpe  # noqa: PLC0415
    from optuna.trial import TrialState  # noqa: PLC0415

    class TPESampler(optuna.samplers.TPESampler):
        """optuna.samplers.TPESampler, the split of the history kept per trial (module docstring)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._infeasible: dict[int, float] = {}  # finished trial id -> _get_infeasible_trial_score
            self._split_of: tuple = ()  # ((trial number, n_below, the history's trial ids), below, above)
            self._reprs: dict[tuple[int, str], Any] = {}  # (finished trial id, categorical name) -> internal value

        def _infeasible_score(self, t) -> float:
            s = self._infeasible.get(t._trial_id)
            if s is None:
                s = self._infeasible[t._trial_id] = tpe._get_infeasible_trial_score(t)
            return s

        def _split(self, study, trials: list, n_below: int) -> tuple[list, list]:
            """optuna's ``_split_trials(study, trials, n_below)`` (5.1), the infeasibility scores read once."""
            complete_trials, pruned_trials, running_trials, infeasible_trials = [], [], [], []
            for trial in trials:
                if trial.state == TrialState.RUNNING:
                    running_trials.append(trial)
                elif self._infeasible_score(trial) > 0:
                    infeasible_trials.append(trial)
                elif trial.state == TrialState.COMPLETE:
                    complete_trials.append(trial)
                elif trial.state == TrialState.PRUNED:
                    pruned_trials.append(trial)
                else:
                    raise AssertionError(trial.state)
            below_complete, above_complete = tpe._split_complete_trials(complete_trials, study, n_below)
            n_below = max(0, n_below - len(below_complete))
            below_pruned, above_pruned = tpe._split_pruned_trials(pruned_trials, study, n_below)
            n_below = max(0, n_below - len(below_pruned))
            n_inf = min(n_below, len(infeasible_trials))  # _split_infeasible_trials
            by_score = sorted(infeasible_trials, key=self._infeasible_score)
            below_infeasible, above_infeasible = by_score[:n_inf], by_score[n_inf:]
            below_trials = below_complete + below_pruned + below_infeasible
            above_trials = above_complete + above_pruned + above_infeasible + running_trials
            below_trials.sort(key=lambda trial: trial.number)
            above_trials.sort(key=lambda trial: trial.number)
            return below_trials, above_trials

        def _get_internal_repr(self, trials: list, search_space: dict, study) -> dict[str, Any]:
            """optuna's ``TPESampler._get_internal_repr`` (5.1), a finished trial's categorical values looked up in
            their choices once (a name's choices are fixed within a study: Optuna refuses others)."""
            values: dict[str, list] = {param_name: [] for param_name in search_space}
            memo = self._reprs
            for trial in trials:
                params = self._get_params(trial, study)
                if search_space.keys() <= params.keys():
                    finished = trial.state.is_finished()
                    for param_name, distribution in search_space.items():
                        if finished and isinstance(distribution, CategoricalDistribution):
                            key = (trial._trial_id, param_name)
                            v = memo.get(key)
                            if v is None:
                                v = memo[key] = distribution.to_internal_repr(params[param_name])
                        else:
                            v = distribution.to_internal_repr(params[param_name])
                        values[param_name].append(v)
            return {k: np.asarray(v) for k, v in values.items()}

        def _sample(self, study, trial, search_space: dict) -> dict[str, Any]:
            """optuna's ``TPESampler._sample`` (5.1), the split made once per trial where the history holds finished
            trials only (with --storage another worker's running trial can gain parameters between two calls)."""
            if self._constant_liar:
                states = [TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING]
            else:
                states = [TrialState.COMPLETE, TrialState.PRUNED]
            use_cache = not self._constant_liar
            trials = study._get_trials(deepcopy=False, states=states, use_cache=use_cache)
            if self._constant_liar:  # for constant_liar, filter out the current trial
                trials = [t for t in trials if trial.number != t.number]
            if self._gamma is None:
                if len(study.directions) <= 1:
                    self._gamma = tpe.default_gamma
                else:
                    self._gamma = tpe.default_gamma_multiobjective
            n = sum(t.state != TrialState.RUNNING for t in trials)  # running trials are ignored (optuna #4073)
            n_below = self._gamma(n)
            key = (trial.number, n_below, tuple(t._trial_id for t in trials)) if n == len(trials) else None
            memo = self._split_of
            if key is not None and memo and memo[0] == key:
                below_trials, above_trials = memo[1], memo[2]
            else:
                below_trials, above_trials = self._split(study, trials, n_below)
                self._split_of = (key, below_trials, above_trials) if key is not None else ()

            mpe_below = self._build_parzen_estimator(study, search_space, below_trials, handle_below=True)
            mpe_above = self._build_parzen_estimator(study, search_space, above_trials, handle_below=False)
            samples_below = mpe_below.sample(self._rng.rng, self._n_ei_candidates)
            acq_func_vals = self._compute_acquisition_func(samples_below, mpe_below, mpe_above)
            ret = TPESampler._compare(samples_below, acq_func_vals)
            for param_name, dist in search_space.items():
                ret[param_name] = dist.to_external_repr(ret[param_name])
            return ret

    _CLASS["tpe"] = TPESampler
    return TPESampler
