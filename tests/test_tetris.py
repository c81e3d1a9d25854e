"""Tests of common/tetris.py against the rules in docs/tetris.md (PufferLib 3.0 Ocean Tetris without its bugs).

Rules are tested on scripted positions (`Tetris.set_position`), statistics and determinism on random play.
"""

import warnings

import gymnasium
import numpy as np
import pufferlib.vector
import pytest
from gymnasium.utils.env_checker import check_env

from common.tetris import HARD_DROP, HOLD, LEFT, NOOP, PIECE_CELLS, PIECE_NAMES, RIGHT, ROTATE, SOFT_DROP, Tetris

# The cells of docs/tetris.md's table, written out again so that a typo in the env's table fails here.
SPEC_CELLS = {
    "O": ["(0,0)(0,1)(1,0)(1,1)"] * 4,
    "I": ["(0,0)(1,0)(2,0)(3,0)", "(0,0)(0,1)(0,2)(0,3)"] * 2,
    "S": ["(0,0)(1,0)(1,1)(2,1)", "(0,1)(0,2)(1,0)(1,1)"] * 2,
    "Z": ["(0,1)(1,0)(1,1)(2,0)", "(0,0)(0,1)(1,1)(1,2)"] * 2,
    "T": ["(0,1)(1,0)(1,1)(2,1)", "(0,1)(1,0)(1,1)(1,2)", "(0,0)(1,0)(1,1)(2,0)", "(0,0)(0,1)(0,2)(1,1)"],
    "L": ["(0,0)(1,0)(2,0)(2,1)", "(0,0)(0,1)(0,2)(1,0)", "(0,0)(0,1)(1,1)(2,1)", "(0,2)(1,0)(1,1)(1,2)"],
    "J": ["(0,1)(1,1)(2,0)(2,1)", "(0,0)(1,0)(1,1)(1,2)", "(0,0)(0,1)(1,0)(2,0)", "(0,0)(0,1)(0,2)(1,2)"],
}
N_ROWS = 20
N_COLS = 10


def spec_cells(piece, rot):
    text = SPEC_CELLS[piece][rot]
    return {(int(a), int(b)) for a, b in (pair.split(",") for pair in text.strip("()").split(")("))}


def board(**rows):
    """A 20x10 board as strings; `board(r19="##########")` sets row 19, every other row is empty."""
    lines = ["." * N_COLS] * N_ROWS
    for name, line in rows.items():
        lines[int(name[1:])] = line
    return lines


def one_game(**kwargs):
    return Tetris(num_envs=1, **kwargs)


def act(env, action):
    """Step game 0 of a 1-game env; return (reward, terminal, truncation)."""
    _, rewards, terminals, truncations, _ = env.step(np.array([action], dtype=np.int32))
    return float(rewards[0]), bool(terminals[0]), bool(truncations[0])


def falling_cells(env):
    """(row, col) of the cells observed as falling piece (0.5) in game 0's observation."""
    grid = env.observations[0, : N_ROWS * N_COLS].reshape(N_ROWS, N_COLS)
    return {(int(r), int(c)) for r, c in zip(*np.nonzero(grid == 0.5))}


def locked_cells(env):
    """Game 0's observed board without the falling piece."""
    grid = env.observations[0, : N_ROWS * N_COLS].reshape(N_ROWS, N_COLS)
    return np.where(grid == 0.5, 0.0, grid)


# ----- pieces -----


@pytest.mark.parametrize("piece", list(PIECE_NAMES))
def test_piece_cells_match_spec(piece):
    env = one_game()
    for rot in range(4):
        assert set(PIECE_CELLS[PIECE_NAMES.index(piece)][rot]) == spec_cells(piece, rot)
        env.set_position(piece=piece, rot=rot, row=5, col=3)
        assert falling_cells(env) == {(5 + r, 3 + c) for r, c in spec_cells(piece, rot)}
        # The collision masks: a block in any box cell collides exactly when the piece has that cell.
        for r in range(4):
            for c in range(4):
                env.set_position(
                    board=board(**{f"r{5 + r}": "." * (3 + c) + "#" + "." * (6 - c)}),
                    piece=piece,
                    rot=rot,
                    row=0,
                    col=3,
                )
                fits = env._fits(np.array([0]), np.array([PIECE_NAMES.index(piece) * 4 + rot]), 5, 3)[0]
                assert fits == ((r, c) not in spec_cells(piece, rot)), (piece, rot, r, c)


# ----- moves, rotation, drops -----


def test_moves_stop_at_walls():
    env = one_game()
    env.set_position(piece="O", row=5, col=0)
    act(env, LEFT)
    assert env.piece_col[0] == 0
    act(env, RIGHT)
    assert env.piece_col[0] == 1
    env.set_position(piece="O", row=5, col=8)
    act(env, RIGHT)
    assert env.piece_col[0] == 8
    env.set_position(piece="I", rot=0, row=5, col=9)  # vertical I in the last column
    act(env, RIGHT)
    assert env.piece_col[0] == 9
    act(env, ROTATE)  # flat I would need columns 9..12: no wall kick, so nothing happens
    assert (env.piece_rot[0], env.piece_col[0]) == (0, 9)
    env.set_position(piece="I", rot=0, row=5, col=6)
    assert act(env, ROTATE) == (0.0, False, False)
    assert env.piece_rot[0] == 1
    assert falling_cells(env) == {(5, 6), (5, 7), (5, 8), (5, 9)}


def test_moves_and_rotation_stop_at_blocks():
    env = one_game()
    env.set_position(board=board(r6="..#....#.."), piece="O", row=5, col=3)
    act(env, LEFT)  # (6,2) is taken
    assert env.piece_col[0] == 3
    for _ in range(3):
        act(env, RIGHT)  # the third one would cover (6,7)
    assert env.piece_col[0] == 5
    env.set_position(board=board(r5="......#..."), piece="I", rot=0, row=5, col=3)
    act(env, ROTATE)  # flat I would cover (5,3..6)
    assert env.piece_rot[0] == 0
    env.set_position(board=board(r8="...#......"), piece="T", rot=0, row=5, col=3)
    act(env, SOFT_DROP)  # cells (6,4) (7,3) (7,4) (8,4) are free
    assert env.piece_row[0] == 6
    assert act(env, SOFT_DROP) == (0.0, False, False)  # cell (1,0) would land on (8,3)
    assert env.piece_row[0] == 6
    assert env.board(0).sum() == 1  # a blocked soft drop does not lock


def test_soft_drop_reward_and_score():
    env = one_game()
    env.set_position(piece="T", row=3)
    assert act(env, SOFT_DROP) == (pytest.approx(0.01), False, False)
    assert (env.piece_row[0], env.score[0]) == (4, 1)
    env.set_position(piece="O", row=18)  # resting on the floor
    assert act(env, SOFT_DROP)[0] == 0.0
    assert env.piece_row[0] == 18


def test_hard_drop_rewards_per_row_and_locks():
    env = one_game()
    env.set_position(board=board(r19="#........."), piece="I", rot=0, row=0, col=0, upcoming="SZ")
    reward, terminal, _ = act(env, HARD_DROP)
    assert reward == pytest.approx(0.02 * 15) and not terminal  # lands on the block: rows 15..18
    assert env.score[0] == 30
    assert env.board(0)[15:, 0].tolist() == [1, 1, 1, 1, 1]
    assert (PIECE_NAMES[env.deck[0, 0]], PIECE_NAMES[env.deck[0, 1]]) == ("S", "Z")
    assert (env.piece_row[0], env.piece_col[0], env.piece_rot[0]) == (0, 5, 0)
    assert (locked_cells(env) == env.board(0)).all()


def test_gravity_every_four_ticks_then_lock():
    env = one_game()
    env.set_position(piece="O", row=17)
    for _ in range(3):
        act(env, NOOP)
    assert env.piece_row[0] == 17
    assert act(env, NOOP)[0] == 0.0  # 4th tick: falls, no reward
    assert env.piece_row[0] == 18 and env.tick_fall[0] == 0
    for _ in range(4):
        act(env, NOOP)  # 4th tick: cannot fall, locks
    assert env.board(0)[18:, :].sum() == 4 and env.piece_row[0] == 0


@pytest.mark.parametrize("cleared, reward", [(1, 0.1), (2, 0.3), (3, 0.5), (4, 1.0)])
def test_line_clears_score_and_shift_rows_down(cleared, reward):
    # Bottom `cleared` rows miss only column 0; the rows above them in reach of the I miss column 5
    # too, so they stay. A marker at (10, 3) must move down by `cleared` rows.
    rows = {"r10": "...#......"}
    for r in range(16, 20):
        rows[f"r{r}"] = ".#########" if r >= 20 - cleared else ".####.####"
    env = one_game()
    env.set_position(board=board(**rows), piece="I", rot=0, row=0, col=0)
    got, terminal, _ = act(env, HARD_DROP)
    assert got == pytest.approx(0.02 * 16 + reward) and not terminal
    assert env.score[0] == 32 + {1: 100, 2: 300, 3: 500, 4: 1000}[cleared]
    assert env.lines[0] == cleared and env.clears[0] == 1
    expected = np.zeros((20, 10), dtype=np.uint8)
    expected[10 + cleared, 3] = 1
    expected[20 - (4 - cleared) :, :] = [1, 1, 1, 1, 1, 0, 1, 1, 1, 1]
    assert (env.board(0) == expected).all()
    assert (locked_cells(env) == expected).all()


def test_clearing_non_adjacent_rows_keeps_the_row_between():
    env = one_game()
    env.set_position(board=board(r17=".#########", r18=".####.####", r19=".#########"), piece="I", col=0)
    assert act(env, HARD_DROP)[0] == pytest.approx(0.02 * 16 + 0.3)
    expected = np.zeros((20, 10), dtype=np.uint8)
    expected[19] = [1, 1, 1, 1, 1, 0, 1, 1, 1, 1]  # row 18 falls by one (row 19 cleared)
    expected[18, 0] = 1  # the I's top cell, row 16, falls by two
    assert (env.board(0) == expected).all()


def test_game_over_when_the_spawn_overlaps():
    env = one_game()
    env.set_position(board=board(r1=".....#...."), piece="O", row=0, col=0, upcoming="O")
    reward, terminal, truncation = act(env, HARD_DROP)  # O lands on the floor, the next O hits (1,5)
    assert terminal and not truncation
    assert reward == pytest.approx(0.02 * 18)
    # Same-step autoreset: a new game is already observed.
    assert env.tick[0] == 0 and env.score[0] == 0 and env.board(0).sum() == 0
    assert env.observations[0, :200].sum() == 4 * 0.5
    # The last observation shows the locked O (a piece that did not fit is drawn over the board).
    assert env.final_observations[0, :200].reshape(20, 10)[18:, :2].tolist() == [[1.0, 1.0], [1.0, 1.0]]
    # render_final draws that last position, not the new game render() would show
    drawn = env.render_final().splitlines()
    assert len(drawn) == 21 and drawn[-1] == "+----------+"
    assert drawn[18] == drawn[19] == "|##........|"  # the O that landed
    assert drawn[0] == drawn[1] == "|.....@@...|"  # the O that no longer fit, drawn over the cell it hit
    assert "#" not in env.render().split("\n")[19]


def test_no_game_over_when_the_spawn_is_free():
    env = one_game()
    env.set_position(board=board(r2=".....##..."), piece="O", row=0, col=0, upcoming="O")
    assert act(env, HARD_DROP)[1] is False  # the next O covers rows 0..1 only
    env.set_position(board=board(r2="....#.#..."), piece="O", row=0, col=0, upcoming="I")
    assert act(env, HARD_DROP)[1] is False  # a vertical I covers (0..3, 5) only
    env.set_position(board=board(r2=".....#...."), piece="O", row=0, col=0, upcoming="I")
    assert act(env, HARD_DROP)[1] is True


def test_hold_once_per_piece_and_reenabled_by_lock():
    env = one_game()
    env.set_position(piece="T", row=4, col=2, upcoming="SZ")
    act(env, HOLD)  # empty hold: take the next piece
    assert PIECE_NAMES[env.deck[0, 0]] == "S" and PIECE_NAMES[env.hold[0]] == "T"
    assert PIECE_NAMES[env.deck[0, 1]] == "Z"
    assert (env.piece_row[0], env.piece_col[0], env.piece_rot[0], env.can_hold[0]) == (0, 5, 0, False)
    act(env, HOLD)  # a second hold for the same piece does nothing
    assert PIECE_NAMES[env.deck[0, 0]] == "S" and PIECE_NAMES[env.hold[0]] == "T"
    act(env, HARD_DROP)  # S locks, Z spawns, hold is allowed again
    assert PIECE_NAMES[env.deck[0, 0]] == "Z" and env.can_hold[0]
    assert act(env, HOLD)[0] == 0.0
    assert PIECE_NAMES[env.deck[0, 0]] == "T" and PIECE_NAMES[env.hold[0]] == "Z"


def test_hold_is_a_noop_when_the_incoming_piece_does_not_fit():
    env = one_game()
    env.set_position(board=board(r2=".....#...."), piece="O", row=5, col=0, hold="I")
    act(env, HOLD)  # a vertical I at (0,5) would cover (2,5)
    assert PIECE_NAMES[env.deck[0, 0]] == "O" and PIECE_NAMES[env.hold[0]] == "I"
    assert (env.piece_row[0], env.piece_col[0], env.can_hold[0]) == (5, 0, True)


def test_tick_limit_is_a_truncation():
    env = one_game(max_ticks=50)
    for t in range(1, 50):
        assert act(env, NOOP)[1:] == (False, False), t
    assert act(env, NOOP)[1:] == (False, True)
    assert env.final_observations[0, 200] == 1.0  # tick / max_ticks of the last observation
    assert env.tick[0] == 0 and env.observations[0, 200] == 0.0


# ----- observation -----


def test_observation_layout():
    env = one_game()
    assert env.single_observation_space.shape == (234,)
    env.set_position(piece="T", rot=2, row=4, col=3, upcoming="LJ", hold="S", can_hold=False, tick=2500, tick_fall=2)
    obs = env.observations[0]
    assert obs[200:206].tolist() == pytest.approx([0.25, 0.5, 0.2, 0.3, 2 / 3, 0.0])
    assert np.flatnonzero(obs[206:] == 1).tolist() == [4, 7 + 5, 14 + 6, 21 + 2]  # T, L, J, hold S
    assert falling_cells(env) == {(4, 3), (5, 3), (5, 4), (6, 3)}
    env.set_position(piece="O", hold=None, can_hold=True)
    assert obs[205] == 1.0 and obs[227:234].sum() == 0.0


def test_np_take_gathers_play_the_same_games_as_fancy_indexing():
    """The env's np.take row gathers (a speed trick) against their plain form, x[rows]: the same observations,
    rewards, ends and episode stats, step for step, with holds, locks and game overs in the mix. Random moves clear
    no lines, but no gather is on that path: they are in the piece cells, the lock and the deck."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_tetris_env import plain_gathers_tetris

    ours = Tetris(num_envs=64, seed=5, log_interval=16)
    plain = plain_gathers_tetris()(num_envs=64, seed=5, log_interval=16)
    actions = np.random.default_rng(0).integers(0, 7, (1500, 64))
    ended = 0
    for step_actions in actions:
        a = ours.step(step_actions)
        b = plain.step(step_actions)
        for x, y in zip(a[:4], b[:4]):
            np.testing.assert_array_equal(x, y)
        assert a[4] == b[4]
        ended += int(a[2].sum())
    assert ended > 100  # many games ended and restarted: every path was taken


def test_observations_stay_in_the_box_and_match_the_state():
    env = Tetris(num_envs=256, seed=1)
    rng = np.random.default_rng(1)
    for _ in range(300):
        obs, *_ = env.step(rng.integers(0, 7, 256, dtype=np.int32))
        assert obs.min() >= 0.0 and obs.max() <= 1.0
    expected = Tetris(num_envs=256, seed=2)
    for i in range(0, 256, 17):  # rebuild each observation from scratch and compare
        hold = env.hold[i] if env.hold[i] >= 0 else None
        expected.set_position(
            i,
            board=env.board(i),
            piece=env.deck[i, 0],
            rot=env.piece_rot[i],
            row=env.piece_row[i],
            col=env.piece_col[i],
            hold=hold,
            can_hold=env.can_hold[i],
            upcoming=env.deck[i, 1:],
            tick=env.tick[i],
            tick_fall=env.tick_fall[i],
        )
        assert (expected.observations[i] == obs[i]).all()


# ----- determinism and vectorization -----


def random_stream(env, steps, reset_seed):
    """Observations of `steps` steps of the same random actions, after reset(seed=reset_seed)."""
    rng = np.random.default_rng(0)
    out = [env.reset(seed=reset_seed)[0].copy()]
    for _ in range(steps):
        out.append(env.step(rng.integers(0, 7, env.num_agents, dtype=np.int32))[0].copy())
    return np.array(out)


def test_same_seed_same_games_other_seed_other_games():
    a = random_stream(Tetris(num_envs=16), 1000, reset_seed=7)
    assert (a == random_stream(Tetris(num_envs=16), 1000, reset_seed=7)).all()
    assert not (a == random_stream(Tetris(num_envs=16), 1000, reset_seed=8)).all()
    # The constructor's seed alone (no reset) also fixes the games.
    first = Tetris(num_envs=16, seed=5)
    second = Tetris(num_envs=16, seed=5)
    assert (first.observations == second.observations).all()


def test_serial_and_multiprocessing_give_the_same_streams():
    actions = np.random.default_rng(0).integers(0, 7, (200, 16), dtype=np.int32)

    def stream(backend, **kwargs):
        vecenv = pufferlib.vector.make(Tetris, backend=backend, num_envs=2, env_kwargs=dict(num_envs=8), **kwargs)
        try:
            out = [vecenv.reset(seed=3)[0].copy()]
            out += [vecenv.step(a)[0].copy() for a in actions]
            return np.array(out)
        finally:
            vecenv.close()

    serial = stream(pufferlib.vector.Serial)
    assert (serial == stream(pufferlib.vector.Multiprocessing, num_workers=2, overwork=True)).all()
    # Env object 1 of the vecenv plays the games of a lone Tetris reset with seed 3 + 1.
    alone = Tetris(num_envs=8)
    out = [alone.reset(seed=4)[0].copy()] + [alone.step(a[8:])[0].copy() for a in actions]
    assert (serial[:, 8:] == np.array(out)).all()


def test_serial_backend_writes_into_its_buffers():
    vecenv = pufferlib.vector.make(Tetris, backend=pufferlib.vector.Serial, num_envs=2, env_kwargs=dict(num_envs=4))
    vecenv.reset(seed=0)
    assert np.shares_memory(vecenv.observations, vecenv.envs[1].observations)
    assert np.shares_memory(vecenv.rewards, vecenv.envs[1].rewards)


# ----- statistics -----


def first_episodes(policy, num_envs, seed=3):
    """Length and return of each game's first episode (each fully observed, so unbiased)."""
    env = Tetris(num_envs=num_envs, seed=seed, log_interval=10**9)
    rng = np.random.default_rng(seed)
    returns = np.zeros(num_envs)
    lengths = np.zeros(num_envs)
    running = np.ones(num_envs, dtype=bool)
    while running.any():
        _, rewards, terminals, truncations, _ = env.step(policy(rng, num_envs))
        returns += rewards * running
        lengths += running
        running &= ~(terminals | truncations)
    return lengths, returns


# The figures below are Ocean's: PufferLib 3.0.0's Tetris (built by benchmarks/build_ocean_tetris.sh), the same
# first games of each env, the same policies.
def test_random_agent_matches_ocean_statistics():
    lengths, returns = first_episodes(lambda rng, n: rng.integers(0, 7, n, dtype=np.int32), 10240)
    assert lengths.mean() == pytest.approx(67.1, rel=0.1)
    assert returns.mean() == pytest.approx(1.81, rel=0.1)


def test_constant_action_agents_match_ocean_statistics():
    lengths, returns = first_episodes(lambda rng, n: np.full(n, SOFT_DROP, dtype=np.int32), 4096)
    assert (lengths.mean(), returns.mean()) == (pytest.approx(66.4, rel=0.1), pytest.approx(0.52, rel=0.1))
    lengths, returns = first_episodes(lambda rng, n: np.full(n, HARD_DROP, dtype=np.int32), 4096)
    assert (lengths.mean(), returns.mean()) == (pytest.approx(6.9, rel=0.1), pytest.approx(1.24, rel=0.1))


def test_episode_stats_in_info():
    env = Tetris(num_envs=64, seed=0, log_interval=50)
    for _ in range(49):
        assert env.step(np.full(64, HARD_DROP, dtype=np.int32))[4] == []
    (info,) = env.step(np.full(64, HARD_DROP, dtype=np.int32))[4]
    assert set(info) == {
        "score",
        "perf",
        "ep_length",
        "ep_return",
        "lines_deleted",
        "avg_combo",
        "atn_frac_soft_drop",
        "atn_frac_hard_drop",
        "atn_frac_rotate",
        "n",
    }
    assert info["n"] > 64 * 3
    assert info["atn_frac_hard_drop"] == 1.0 and info["atn_frac_rotate"] == 0.0
    assert info["ep_return"] == pytest.approx(info["score"] / 100)  # no lines cleared: only drop rewards
    assert info["lines_deleted"] == 0.0
    assert info["perf"] == pytest.approx(info["score"] / 12565)
    assert env.step(np.full(64, HARD_DROP, dtype=np.int32))[4] == []


# ----- gymnasium, render, bad input -----


def test_gymnasium_registration_and_checker():
    env = gymnasium.make("PufferTetris-v0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (234,) and obs.dtype == np.float32
    ended = False
    for _ in range(40):
        obs, reward, terminated, truncated, info = env.step(HARD_DROP)
        if terminated:
            ended = True
            assert info["n"] == 1 and obs[200] > 0  # the last observation, not a new game's
            break
    assert ended


def test_render_shows_the_board():
    env = one_game()
    env.set_position(board=board(r19="###......."), piece="O", row=3, col=4, upcoming="IT", hold="S")
    lines = env.render().splitlines()
    assert len(lines) == 21
    assert lines[3].startswith("|....@@....|") and lines[19].startswith("|###.......|")
    assert "next  I T" in env.render() and "hold  S" in env.render()


@pytest.mark.parametrize(
    "actions, message",
    [
        (np.array([0, 7], dtype=np.int32), "in \\[0, 6\\]"),
        (np.array([-1, 0], dtype=np.int32), "in \\[0, 6\\]"),
        (np.array([0.0, 1.0]), "dtype float64"),
        (np.zeros(3, dtype=np.int32), "shape"),
    ],
)
def test_bad_actions_raise(actions, message):
    env = Tetris(num_envs=2)
    with pytest.raises(ValueError, match=message):
        env.step(actions)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(n_rows=3), "n_rows"),
        (dict(n_cols=2), "n_cols"),
        (dict(n_cols=13), "n_cols"),
        (dict(deck_size=0), "deck_size"),
        (dict(num_envs=0), "num_envs"),
    ],
)
def test_bad_constructor_arguments_raise(kwargs, name):
    with pytest.raises(ValueError, match=name):
        Tetris(**kwargs)


def test_smallest_board_plays():
    env = Tetris(num_envs=32, n_rows=4, n_cols=3, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(200):
        obs, *_ = env.step(rng.integers(0, 7, 32, dtype=np.int32))
        assert obs.shape == (32, 12 + 6 + 28) and obs.min() >= 0 and obs.max() <= 1


def test_gym_env_rejects_float_actions():
    env = gymnasium.make("PufferTetris-v0").unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError, match="integer"):
        env.step(1.5)
