"""Atari games for ppo_puffer_async.py, through ale-py's AtariVectorEnv (C++ envs stepped by threads), in
common/puffer_envs.py's contract: same-step resets, `final_observations`, `masks`. ale-py is GPL-2.0 (its LICENSE.md
at 0.12.1): an optional extra, `pip install -e ".[atari]"`, imported only when an Atari env is built.

The preprocessing is the Nature DQN's (Mnih et al. 2015), as in CleanRL's ppo_atari.py: a step is 4 frames with the
last two max-pooled, observations 4 stacked 84x84 grayscale frames (uint8), no sticky actions, the game truncated at
108,000 frames. A lost life ends the learner's episode (`terminals`) but not the game; `game_over` says which steps
ended a whole game, whose unclipped return is the one logged. Rewards arrive unclipped: the learner clips them
(--reward-clamp 1).

Where it differs from CleanRL's wrappers (CleanRL at fe8d8a03: cleanrl/ppo_atari.py's make_env and
cleanrl_utils/atari_wrappers.py; ours: ale-py 0.12.1's src/ale/vector/preprocessed_env.cpp at the defaults of its
vector_env.py, noop_max=30 and use_fire_reset=True). A game starts with FIRE for one frame and then 0-28 no-op
frames (CleanRL: 1-30 no-op frames, then FIRE and action 2 for a 4-frame step each). After a lost life CleanRL's env
resets (a no-op step, FIRE and action 2, a fresh frame stack); ALE's plays on, so the policy presses FIRE itself
(one of Breakout's 4 actions). ALE makes each frame gray (Rec. 601 weights) before it max-pools and resizes it;
CleanRL max-pools in colour, resizes, then makes it gray (Gymnasium's GrayscaleObservation, Rec. 709 weights). The
logged episode lengths count agent steps; CleanRL's count frames (its RecordEpisodeStatistics wraps the env of
single frames). docs/atari.md has the table."""

import numpy as np

FRAMESKIP = 4
MAX_FRAMES = 108_000  # ALE's standard cap on a game (ale-py 0.12.1's vector_env.py default): 30 minutes at 60 fps


def game_name(env_id: str) -> str:
    """ "atari-breakout" -> "breakout" (ALE's ROM name); "" for an id that is not of this form."""
    return env_id[len("atari-") :] if env_id.startswith("atari-") else ""


def import_ale():
    """ale_py, or one line saying how to install it."""
    try:
        import ale_py
        import ale_py.vector_env
    except ImportError:
        raise ValueError('Atari needs ale-py (GPL-2.0, an optional extra): pip install -e ".[atari]"') from None
    return ale_py


def check_game(game: str) -> None:
    """One line for a game ALE does not have, with how to list those it has."""
    ale_py = import_ale()
    if game not in ale_py.roms.get_all_rom_ids():
        raise ValueError(
            f"--env-id atari-{game}: ALE has no game {game!r}; its names (e.g. breakout, pong, beam_rider) are listed "
            'by: python -c "import ale_py.roms; print(ale_py.roms.get_all_rom_ids())"'
        )


class AtariEnvs:
    """`num_envs` games in `groups` AtariVectorEnvs of num_envs / groups games each (common/vector.py's protocol:
    async_reset, recv, send). recv returns the groups in turn, so while the policy acts for one group, ALE's threads
    step the others, and a run is the same at a fixed seed. `render`: a twin of game 0 (the same seed, sent the same
    actions) returns its full 210x160 RGB screen, for videos (ale-py 0.12.1's AtariVectorEnv has no render())."""

    def __init__(self, game: str, num_envs: int, *, groups=1, threads=2, max_frames=MAX_FRAMES, render=False):
        ale_py = import_ale()
        check_game(game)
        if num_envs % groups:
            raise ValueError(f"--num-envs {num_envs} (Atari games) must be divisible by --async-factor {groups}")
        self.per_group = num_envs // groups
        self.envs = []
        for _ in range(groups):
            # Beside CleanRL at fe8d8a03: its NoFrameskip-v4 envs have no sticky actions (ale-py 0.12.1's
            # registration.py) and its EpisodicLifeEnv ends the learner's episode at a lost life
            # (cleanrl_utils/atari_wrappers.py).
            env = ale_py.vector_env.AtariVectorEnv(
                game,
                self.per_group,
                num_threads=min(threads, self.per_group),
                max_num_frames_per_episode=max_frames,
                repeat_action_probability=0.0,  # no sticky actions, as CleanRL's NoFrameskip-v4 envs
                autoreset_mode="SameStep",  # the contract: a game that ends is reset in the same step
                frameskip=FRAMESKIP,
                episodic_life=False,  # a lost life does not restart the game...
                life_loss_info=True,  # ...but ends the learner's episode (terminal), as CleanRL's EpisodicLifeEnv
                reward_clipping=False,  # the learner clips; the logged returns are the game's score
            )
            self.envs.append(env)
        self.twin = None
        if render:
            self.twin = ale_py.vector_env.AtariVectorEnv(
                game,
                1,
                num_threads=1,
                max_num_frames_per_episode=max_frames,
                repeat_action_probability=0.0,
                autoreset_mode="SameStep",
                frameskip=FRAMESKIP,
                life_loss_info=True,
                reward_clipping=False,
                img_height=210,
                img_width=160,
                grayscale=False,
                stack_num=1,
            )
        self.num_envs = num_envs
        self.num_agents = num_envs
        self.agents_per_env = 1
        self.single_observation_space = self.envs[0].single_observation_space
        self.single_action_space = self.envs[0].single_action_space
        self.final_observations = np.zeros((num_envs, *self.single_observation_space.shape), np.uint8)
        self.game_over = np.zeros(num_envs, bool)  # the last recv's step ended a whole game (not just a life)
        self.frame_numbers = np.zeros(num_envs, np.int64)  # each game's frame count: it drops when a game resets
        self.masks = np.ones(self.per_group, bool)
        self.kinds = None
        self.agent_kinds = None
        self.action_masks = None
        self.group = 0
        self.reset_pending = [None] * groups
        self.twin_frame = None

    def async_reset(self, seed: int = 0) -> None:
        """Resets every game, game i from seed + i."""
        self.frame_numbers[:] = 0  # fresh games: none of them ends in the reset's step
        for g, env in enumerate(self.envs):
            self.reset_pending[g] = env.reset(seed=seed + g * self.per_group)
        if self.twin is not None:
            obs, _ = self.twin.reset(seed=seed)
            self.twin_frame = obs[0, 0]
        self.group = 0

    def recv(self):
        """The next group's (observations, rewards, terminals, truncations, infos, agents, masks)."""
        g = self.group
        agents = np.arange(g * self.per_group, (g + 1) * self.per_group)
        if self.reset_pending[g] is not None:
            obs, info = self.reset_pending[g]
            self.reset_pending[g] = None
            rewards = np.zeros(self.per_group, np.float32)
            terminals = np.zeros(self.per_group, bool)
            truncations = np.zeros(self.per_group, bool)
        else:
            obs, rewards, terminals, truncations, info = self.envs[g].recv()
            rewards = rewards.astype(np.float32)
            ended = terminals | truncations
            if ended.any():
                self.final_observations[agents[ended]] = info["final_obs"][ended]
        frames = info["episode_frame_number"]
        self.game_over[agents] = frames < self.frame_numbers[agents]  # the game was reset: it ended in this step
        self.frame_numbers[agents] = frames
        return obs, rewards, terminals, truncations, [], agents, self.masks

    def send(self, actions: np.ndarray) -> None:
        self.envs[self.group].send(actions.astype(np.int64))
        if self.twin is not None and self.group == 0:
            obs = self.twin.step(actions[:1].astype(np.int64))[0]
            self.twin_frame = obs[0, 0]
        self.group = (self.group + 1) % len(self.envs)

    def frame(self) -> np.ndarray:
        """Game 0's RGB screen (210, 160, 3), from the twin (render=True)."""
        return self.twin_frame

    def close(self) -> None:
        for env in self.envs:
            env.close()
        if self.twin is not None:
            self.twin.close()
