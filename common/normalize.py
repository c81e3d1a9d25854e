"""Running statistics for normalizing observations and rewards, the arithmetic written once (whether and what a
script normalizes is its own decision); frozen for evaluation and saved, so a policy sees what it trained on."""

from typing import Optional

import numpy as np
import torch


class RunningMeanStd:
    """Running mean and variance of a stream of batches (Chan et al.'s parallel update), as in SB3 2.9.2's
    common/running_mean_std.py."""

    def __init__(self, shape=()):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = 1e-4

    def update(self, batch: np.ndarray) -> None:
        batch = batch.reshape(-1, *self.mean.shape)
        n = len(batch)
        # numpy's batch.mean(0) and batch.var(0), bit for bit, without their Python wrappers, whose overhead adds up at
        # CleanRL's ppo_continuous_action.py settings (HalfCheetah), where the observations' and the returns' statistics
        # update every step
        batch_mean = batch.sum(0) / n
        batch_var = ((batch - batch_mean) ** 2).sum(0) / n
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean = self.mean + delta * n / total
        m2 = self.var * self.count + batch_var * n + delta**2 * self.count * n / total
        self.var = m2 / total
        self.count = total
        # 0-d arrays, not numpy scalars
        self.mean = np.asarray(self.mean)
        self.var = np.asarray(self.var)

    def normalize(self, obs: np.ndarray) -> np.ndarray:
        """`obs` scaled by these statistics, clipped to +-10 (normalize_obs)."""
        return normalize_obs(obs, self)

    def state_dict(self) -> dict:
        return {"mean": torch.from_numpy(self.mean), "var": torch.from_numpy(self.var), "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        self.mean = state["mean"].numpy()
        self.var = state["var"].numpy()
        self.count = state["count"]

    @classmethod
    def from_state(cls, state: Optional[dict]) -> Optional["RunningMeanStd"]:
        """The statistics a checkpoint holds; None when the run did not normalize."""
        if state is None:
            return None
        statistics = cls()
        statistics.load_state_dict(state)
        return statistics


def normalize_obs(obs: np.ndarray, obs_rms: Optional[RunningMeanStd], update=False, clip=10.0) -> np.ndarray:
    """Scales observations by the training statistics (after adding `obs` to them, with `update`), clipped to +-clip
    (float32). Evaluation passes the same, frozen, statistics: the policy must see observations scaled as in
    training, not by an eval env's own."""
    if obs_rms is None:
        return obs.astype(np.float32)
    if update:
        obs_rms.update(obs)
    return np.clip((obs - obs_rms.mean) / np.sqrt(obs_rms.var + 1e-8), -clip, clip).astype(np.float32)


class RewardScaler:
    """The running estimate of each env's discounted return, whose standard deviation (`std()`) the scripts divide
    rewards by, as SB3 2.9.2's VecNormalize does (no mean is subtracted: that would change what the best policy is).
    The return estimate restarts at every episode end, terminal or truncated: a truncated episode's value is
    bootstrapped by the learner in the same scaled units, and the next episode starts from scratch."""

    def __init__(self, num_envs: int, gamma: float):
        self.returns = np.zeros(num_envs)
        self.gamma = gamma
        self.rms = RunningMeanStd()

    def track(self, index, rewards: np.ndarray, dones: np.ndarray) -> None:
        """Adds one step's rewards to the running returns of envs `index` (and those returns to the statistics)."""
        self.returns[index] = self.returns[index] * self.gamma + rewards
        self.rms.update(self.returns[index])
        self.returns[index] *= 1.0 - dones  # an episode that ended starts its return from scratch

    def std(self) -> float:
        return float(np.sqrt(self.rms.var + 1e-8))

    def state_dict(self) -> dict:
        return self.rms.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.rms.load_state_dict(state)
