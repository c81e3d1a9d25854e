"""Tetris as a vectorized numpy PufferEnv: one object steps `num_envs` games with array operations.

It plays by the rules of PufferLib 3.0's "Ocean" Tetris (the pufferlib 3.0.0 release's
pufferlib/ocean/tetris/tetris.h; "Ocean" in this file) without its bugs: docs/tetris.md has the rules and
where they depart from Ocean.
Row 0 is the top; pieces are 4 cells in a 4x4 box anchored at (piece_row, piece_col), its top-left.

State, one entry per game (arrays of length num_envs unless noted):
  rows        (N, n_rows + 4) uint16  each board row as a bit mask: bit 0 is a wall at column -1,
              bit c + 1 is column c, the bits right of the board are walls too, and the 4 extra rows
              below the board are full, so floor and walls collide like locked blocks and no bounds
              checks are needed.
  windows     (N, n_rows + 1) int64  a view of `rows`, not a copy: 4 consecutive little-endian
              uint16 rows r..r+3 read as one int64, row r + k in bits 16k..16k+15. Testing a piece
              at row r is `windows[env, r] & piece_mask != 0`, a single AND, and nothing needs to
              be rebuilt when the board changes.
  deck        (N, deck_size + 1)     FIFO of piece ids; deck[:, 0] is the falling piece. Only the
              first deck_size entries are observed; the last one is hidden so that a hold into an
              empty slot always has a next piece to take.
  hold (-1 = empty), can_hold, piece_row, piece_col, piece_rot, tick, tick_fall, score, lines, ...

Speed: every game tests its action's target pose in one gather + AND (no-op games test their current
pose, which is always free), and only the few games that hard-drop, hold, fall or lock take the slower
paths. The observation buffer is updated in place: the 4 falling-piece cells are erased and redrawn,
a lock writes its 4 cells as locked (the whole board only when rows were cleared), the piece one-hots
are rewritten only for games whose deck changed.

Observation (float32, all inside the declared Box(0, 1); deck_size 3 gives Ocean's 234 values):
  [0, n_rows*n_cols)  board r*n_cols+c: 0 empty, 1 locked, 0.5 falling piece (Ocean writes 2,
                      outside its own Box)
  then 6 scalars      tick / max_ticks (Ocean's tick / 10000 at the default), tick_fall / 4,
                      piece_row / n_rows, piece_col / n_cols, piece_rot / 3, can_hold
  then deck_size + 1 one-hots of 7: current piece, deck_size - 1 upcoming pieces, held piece
                      (all zeros when the hold is empty).

Autoreset (same step): when a game ends, `terminals` (game over) or `truncations` (max_ticks reached,
never together with terminals) is set together with that step's reward, the observation row already
holds the NEW game's first observation, and `final_observations` holds the ended game's last one, which
a learner needs to bootstrap V(final_obs) on truncation. It is valid on the rows where
`terminals | truncations` (after a game over it shows the piece that did not fit drawn over the board).
It lives in the env object: with pufferlib.vector.Multiprocessing it stays in the worker process.
"""

import multiprocessing
import time

import gymnasium
import numpy as np
import pufferlib

from common import vector

PIECE_NAMES = "OISZTLJ"
# PIECE_CELLS[piece][rotation]: the 4 occupied (row, col) cells of the 4x4 box, as in Ocean (docs/tetris.md).
PIECE_CELLS = (
    ((((0, 0), (0, 1), (1, 0), (1, 1)),) * 4),
    (((0, 0), (1, 0), (2, 0), (3, 0)), ((0, 0), (0, 1), (0, 2), (0, 3))) * 2,
    (((0, 0), (1, 0), (1, 1), (2, 1)), ((0, 1), (0, 2), (1, 0), (1, 1))) * 2,
    (((0, 1), (1, 0), (1, 1), (2, 0)), ((0, 0), (0, 1), (1, 1), (1, 2))) * 2,
    (
        ((0, 1), (1, 0), (1, 1), (2, 1)),
        ((0, 1), (1, 0), (1, 1), (1, 2)),
        ((0, 0), (1, 0), (1, 1), (2, 0)),
        ((0, 0), (0, 1), (0, 2), (1, 1)),
    ),
    (
        ((0, 0), (1, 0), (2, 0), (2, 1)),
        ((0, 0), (0, 1), (0, 2), (1, 0)),
        ((0, 0), (0, 1), (1, 1), (2, 1)),
        ((0, 2), (1, 0), (1, 1), (1, 2)),
    ),
    (
        ((0, 1), (1, 1), (2, 0), (2, 1)),
        ((0, 0), (1, 0), (1, 1), (1, 2)),
        ((0, 0), (0, 1), (1, 0), (2, 0)),
        ((0, 0), (0, 1), (0, 2), (1, 2)),
    ),
)
NUM_PIECES = 7
# Frames for videos and GIFs (Tetris.frame): a colour per piece, in PIECE_NAMES order, as the guideline's; locked
# cells grey (the board keeps which cells are full, not which piece filled them).
PIECE_COLORS = np.array(
    [(240, 220, 0), (0, 200, 230), (0, 200, 80), (230, 40, 40), (170, 60, 220), (250, 140, 0), (40, 90, 240)], np.uint8
)
LOCKED = np.array((150, 150, 150), np.uint8)
BACKGROUND = np.array((16, 16, 24), np.uint8)
GRID = (48, 48, 60)
# A 3x5 pixel font for the score and line count: each digit's 5 rows, 3 bits a row (4 = left pixel).
DIGITS = [
    (7, 5, 5, 5, 7),
    (2, 6, 2, 2, 7),
    (7, 1, 7, 4, 7),
    (7, 1, 7, 1, 7),
    (5, 5, 7, 1, 1),
    (7, 4, 7, 1, 7),
    (7, 4, 7, 5, 7),
    (7, 1, 1, 1, 1),
    (7, 5, 7, 5, 7),
    (7, 5, 7, 1, 7),
]
NOOP, LEFT, RIGHT, ROTATE, SOFT_DROP, HARD_DROP, HOLD = range(7)
NUM_ACTIONS = 7
TICKS_PER_FALL = 4
# Score and reward of each event, as in Ocean: the reward is score / 100 for drops, and 0.1 / 0.3 / 0.5 / 1.0
# for clearing 1-4 lines (not score / 100 there).
SOFT_DROP_SCORE = 1
SOFT_DROP_REWARD = 0.01
HARD_DROP_SCORE_PER_ROW = 2
HARD_DROP_REWARD_PER_ROW = 0.02
LINE_CLEAR_SCORE = np.array([0, 100, 300, 500, 1000])
LINE_CLEAR_REWARD = np.array([0.0, 0.1, 0.3, 0.5, 1.0], dtype=np.float32)
PERF_SCORE = 12565  # Ocean's "perf" normaliser
# A pose is tested from column -1 (moving left from column 0) to column n_cols + 2 (rotating an I
# flat at the right edge), so a row lane needs n_cols + 4 bits, and 4 lanes must fit in 64 bits.
LANE = 16
FULL_LANE = (1 << LANE) - 1
MAX_COLS = LANE - 4
# What each action does to (row, col, rotation) when it is possible.
ROW_STEP = np.array([0, 0, 0, 0, 1, 0, 0])
COL_STEP = np.array([0, -1, 1, 0, 0, 0, 0])
ROT_STEP = np.array([0, 0, 0, 1, 0, 0, 0])
EPISODE_STATS = (
    "score",
    "perf",
    "ep_length",
    "ep_return",
    "lines_deleted",
    "avg_combo",
    "atn_frac_soft_drop",
    "atn_frac_hard_drop",
    "atn_frac_rotate",
)


class Tetris(pufferlib.PufferEnv):
    """`num_envs` Tetris games stepped together; see the module docstring for state and observation.

    `info` is `[]`, or every `log_interval` steps, if games ended since the last report,
    `[{stat: mean over those episodes for stat in EPISODE_STATS, "n": number of episodes}]`.
    """

    def __init__(
        self, num_envs=1024, n_rows=20, n_cols=10, deck_size=3, max_ticks=10000, seed=0, buf=None, log_interval=128
    ):
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1 (got {num_envs})")
        if n_rows < 4:
            raise ValueError(f"n_rows must be at least 4 so a vertical I fits at spawn (got {n_rows})")
        if not 3 <= n_cols <= MAX_COLS:
            raise ValueError(
                f"n_cols must be in [3, {MAX_COLS}]: 2-wide pieces spawn at column n_cols // 2, "
                f"and 4 rows of n_cols + 4 bits pack into one int64 (got {n_cols})"
            )
        if deck_size < 1:
            raise ValueError(f"deck_size must be at least 1 (got {deck_size})")
        if max_ticks < 1 or log_interval < 1:
            raise ValueError(f"max_ticks and log_interval must be >= 1 (got {max_ticks}, {log_interval})")
        self.n_rows = n_rows
        self.n_cols = n_cols
        self.deck_size = deck_size
        self.max_ticks = max_ticks
        self.log_interval = log_interval
        self.spawn_col = n_cols // 2
        self.num_cells = n_rows * n_cols
        self.scalars_at = self.num_cells
        self.one_hots_at = self.num_cells + 6
        obs_size = self.one_hots_at + NUM_PIECES * (deck_size + 1)
        self.single_observation_space = gymnasium.spaces.Box(0.0, 1.0, (obs_size,), np.float32)
        self.single_action_space = gymnasium.spaces.Discrete(NUM_ACTIONS)
        self.num_agents = num_envs
        super().__init__(buf)
        if not self.observations.flags.c_contiguous:
            raise ValueError("the observation buffer must be C-contiguous: it is written through a flat view")
        self.obs_flat = self.observations.reshape(-1)
        self.obs_row_start = np.arange(num_envs) * obs_size
        self.final_observations = np.zeros_like(self.observations)
        self.rng = np.random.default_rng(seed)

        # Per (piece * 4 + rotation): its cells as a 4-lane mask placed at column -1 (shift by col + 1),
        # and as offsets into the board part of the observation.
        masks = []
        offsets = []
        for rotations in PIECE_CELLS:
            for cells in rotations:
                masks.append(sum(1 << (LANE * r + c) for r, c in cells))
                offsets.append([r * n_cols + c for r, c in cells])
        self.piece_masks = np.array(masks, dtype=np.int64)
        self.cell_offsets = np.array(offsets, dtype=np.int64)
        walls = FULL_LANE & ~(((1 << n_cols) - 1) << 1)
        self.empty_rows = np.array([walls] * n_rows + [FULL_LANE] * 4, dtype="<u2")
        self.cell_bits = 1 << (np.arange(n_cols) + 1)

        n = num_envs
        self.rows = np.tile(self.empty_rows, (n, 1))
        self.rows_flat = self.rows.reshape(-1)
        self.row_start = np.arange(n) * (n_rows + 4)
        # Unaligned int64 views over the uint16 rows, one element per row (a 2-byte stride). Gathers
        # from them are slower than from an aligned copy, but a copy would cost more to keep in sync.
        self.windows = np.ndarray((n, n_rows + 1), "<i8", buffer=self.rows, strides=(2 * (n_rows + 4), 2))
        self.windows_flat = np.ndarray((self.rows.size - 3,), "<i8", buffer=self.rows, strides=(2,))
        self.deck = np.zeros((n, deck_size + 1), dtype=np.int64)
        self.hold = np.full(n, -1, dtype=np.int64)
        self.can_hold = np.ones(n, dtype=bool)
        # clears counts the locks that cleared rows; soft_drops, hard_drops and rotates count attempts.
        (
            self.piece_row,
            self.piece_col,
            self.piece_rot,
            self.tick,
            self.tick_fall,
            self.score,
            self.lines,
            self.clears,
            self.soft_drops,
            self.hard_drops,
            self.rotates,
        ) = np.zeros((11, n), dtype=np.int64)
        self.ep_return = np.zeros(n)
        self.drawn_cells = np.zeros((n, 4), dtype=np.int64)  # flat obs indices of the drawn falling piece
        self.reset()

    # ----- public API -----

    def reset(self, seed=None):
        """Start every game afresh; `seed` reseeds the generator, None continues its stream.

        Returns (observations, []) as PufferLib expects; the buffers are the env's own (or `buf`'s).
        """
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self._new_games(np.arange(self.num_agents))
        self.rewards[:] = 0
        self.terminals[:] = False
        self.truncations[:] = False
        self.steps_since_log = 0
        self.stat_sums = dict.fromkeys(EPISODE_STATS, 0.0)
        self.episodes_since_log = 0
        return self.observations, []

    def step(self, actions):
        """Advance every game one tick: (observations, rewards, terminals, truncations, infos)."""
        actions = self._check_actions(actions)
        self.tick += 1
        self.tick_fall += 1
        self.obs_flat[self.drawn_cells] = 0.0
        self.soft_drops += actions == SOFT_DROP
        self.hard_drops += actions == HARD_DROP
        self.rotates += actions == ROTATE

        # Left, right, rotate and soft drop: every game tests its target pose in one go.
        row = self.piece_row + ROW_STEP[actions]
        col = self.piece_col + COL_STEP[actions]
        rot = (self.piece_rot + ROT_STEP[actions]) & 3
        free = self._fits(slice(None), self.deck[:, 0] * 4 + rot, row, col)
        np.copyto(self.piece_row, row, where=free)
        np.copyto(self.piece_col, col, where=free)
        np.copyto(self.piece_rot, rot, where=free)
        soft_dropped = free & (actions == SOFT_DROP)
        self.score += SOFT_DROP_SCORE * soft_dropped
        np.multiply(soft_dropped, SOFT_DROP_REWARD, out=self.rewards)  # also clears the last step's

        hard = np.flatnonzero(actions == HARD_DROP)
        self._hard_drop(hard)
        self._hold(np.flatnonzero((actions == HOLD) & self.can_hold))

        # Gravity; hard-dropped games lock below, so they skip it.
        self.tick_fall[hard] = 0
        falling = np.flatnonzero(self.tick_fall >= TICKS_PER_FALL)
        self.tick_fall[falling] = 0
        piece = self.deck[falling, 0] * 4 + self.piece_rot[falling]
        can_fall = self._fits(falling, piece, self.piece_row[falling] + 1, self.piece_col[falling])
        self.piece_row[falling[can_fall]] += 1
        game_over = self._lock(np.concatenate([hard, falling[~can_fall]]))

        self.ep_return += self.rewards
        self.terminals[:] = False
        self.terminals[game_over] = True
        np.greater_equal(self.tick, self.max_ticks, out=self.truncations)
        self.truncations[game_over] = False
        self._draw_pieces(slice(None))
        self._write_scalars(slice(None))

        ended = np.flatnonzero(self.terminals | self.truncations)
        if ended.size:
            self.final_observations[ended] = self.observations[ended]
            self._record_episodes(ended)
            self._new_games(ended)
        return self.observations, self.rewards, self.terminals, self.truncations, self._infos()

    def close(self):
        pass

    def board(self, env=0):
        """The locked cells of game `env` as an (n_rows, n_cols) 0/1 array."""
        return ((self.rows[env, : self.n_rows, None] & self.cell_bits) != 0).astype(np.uint8)

    def set_position(
        self,
        env=0,
        board=None,
        piece=None,
        rot=0,
        row=0,
        col=None,
        hold=None,
        can_hold=True,
        upcoming=None,
        tick=None,
        tick_fall=0,
    ):
        """Script a position for game `env` (tests, demos), keeping every derived array consistent.

        board: n_rows strings of n_cols chars ('#' locked, anything else empty) or a 0/1 array.
        piece: letter from PIECE_NAMES or id (None keeps the current one); placed at (row, col)
        (col None = spawn column) with rotation rot. hold: letter/id or None for empty. upcoming:
        letters/ids for deck[1:], front first. The pose must fit the board; that is not checked.
        """

        def piece_id(p):
            return PIECE_NAMES.index(p) if isinstance(p, str) else int(p)

        if board is not None:
            cells = np.array([[ch == "#" for ch in line] for line in board] if isinstance(board[0], str) else board)
            if cells.shape != (self.n_rows, self.n_cols):
                raise ValueError(f"board must be {self.n_rows}x{self.n_cols}, got {cells.shape}")
            self.rows[env, : self.n_rows] = self.empty_rows[: self.n_rows] | (cells.astype(np.int64) @ self.cell_bits)
        if piece is not None:
            self.deck[env, 0] = piece_id(piece)
        if upcoming is not None:
            self.deck[env, 1 : 1 + len(upcoming)] = [piece_id(p) for p in upcoming]
        self.hold[env] = -1 if hold is None else piece_id(hold)
        self.can_hold[env] = can_hold
        self.piece_rot[env] = rot
        self.piece_row[env] = row
        self.piece_col[env] = self.spawn_col if col is None else col
        self.tick_fall[env] = tick_fall
        if tick is not None:
            self.tick[env] = tick
        envs = np.array([env])
        self.observations[env] = 0
        self._write_board(envs)
        self._draw_pieces(envs)
        self._write_scalars(envs)
        self._write_deck(envs)

    def render(self, env=0):
        """A text view of game `env`: '#' locked, '@' falling, '.' empty, with the deck and score."""
        grid = np.where(self.board(env) == 1, "#", ".").astype("<U1")
        cells = self.cell_offsets[self.deck[env, 0] * 4 + self.piece_rot[env]]
        grid[self.piece_row[env] + cells // self.n_cols, self.piece_col[env] + cells % self.n_cols] = "@"
        hold = PIECE_NAMES[self.hold[env]] if self.hold[env] >= 0 else "-"
        side = [
            f"piece {PIECE_NAMES[self.deck[env, 0]]}",
            "next  " + " ".join(PIECE_NAMES[p] for p in self.deck[env, 1 : self.deck_size]),
            f"hold  {hold}{'' if self.can_hold[env] else ' (used)'}",
            f"score {self.score[env]}",
            f"lines {self.lines[env]}",
            f"tick  {self.tick[env]}",
        ]
        lines = [f"|{''.join(r)}|  {side[i] if i < len(side) else ''}".rstrip() for i, r in enumerate(grid)]
        return "\n".join(lines + ["+" + "-" * self.n_cols + "+"])

    def frame(self, env=0, cell=12) -> np.ndarray:
        """Game `env` as an RGB image ((n_rows + 2) * cell, (n_cols + 7) * cell, 3) for videos and GIFs: the board
        (locked cells grey, the falling piece in its colour), then on the right the next pieces, the score and the
        lines cleared, drawn with numpy alone."""
        rows = self.n_rows
        cols = self.n_cols
        colors = np.where(self.board(env)[:, :, None] == 1, LOCKED, BACKGROUND)
        for r, c in PIECE_CELLS[self.deck[env, 0]][self.piece_rot[env]]:
            colors[self.piece_row[env] + r, self.piece_col[env] + c] = PIECE_COLORS[self.deck[env, 0]]
        image = np.zeros(((rows + 2) * cell, (cols + 7) * cell, 3), np.uint8)
        image[:] = GRID
        image[cell : (rows + 1) * cell, cell : (cols + 1) * cell] = colors.repeat(cell, 0).repeat(cell, 1)
        # cell borders
        image[cell : (rows + 1) * cell : cell] = GRID
        image[:, cell : (cols + 1) * cell : cell] = GRID
        for i, piece in enumerate(self.deck[env, 1 : self.deck_size]):  # the next pieces, one 4x4 box each
            for r, c in PIECE_CELLS[piece][0]:
                y = (1 + 4 * i + r) * cell
                x = (cols + 2 + c) * cell
                image[y + 1 : y + cell, x + 1 : x + cell] = PIECE_COLORS[piece]
        for line, number in enumerate((self.score[env], self.lines[env])):  # 3x5 digits, scaled to cell / 4
            for i, digit in enumerate(str(int(number))[-6:]):
                bits = np.array([[(row >> (2 - b)) & 1 for b in range(3)] for row in DIGITS[int(digit)]], bool)
                pixel = max(cell // 4, 1)
                y = (rows - 3 + 2 * line) * cell
                x = (cols + 2) * cell + i * 4 * pixel
                block = image[y : y + 5 * pixel, x : x + 3 * pixel]
                block[bits.repeat(pixel, 0).repeat(pixel, 1)] = 255
        return image

    def render_final(self, env=0):
        """Game `env`'s last position, drawn from its final observation ('#' locked, '@' the last piece).

        The env starts the next game in the same step that ends one, so render() would show the new game;
        after a game over the final observation shows the piece that no longer fit drawn over the board.
        """
        cells = self.final_observations[env, : self.n_rows * self.n_cols].reshape(self.n_rows, self.n_cols)
        grid = np.where(cells == 1.0, "#", np.where(cells > 0.0, "@", "."))
        return "\n".join([f"|{''.join(row)}|" for row in grid] + ["+" + "-" * self.n_cols + "+"])

    # ----- game mechanics -----

    def _check_actions(self, actions):
        actions = np.asarray(actions)
        if actions.shape != (self.num_agents,):
            raise ValueError(f"actions must have shape ({self.num_agents},), got {actions.shape}")
        if actions.dtype.kind not in "iu":
            raise ValueError(f"actions must be integers in [0, {NUM_ACTIONS - 1}], got dtype {actions.dtype}")
        if actions.min() < 0 or actions.max() >= NUM_ACTIONS:
            raise ValueError(f"actions must be in [0, {NUM_ACTIONS - 1}], got min {actions.min()} max {actions.max()}")
        return actions

    def _fits(self, envs, piece, row, col):
        """Whether `piece` (= piece id * 4 + rotation) at (row, col) overlaps neither blocks nor walls."""
        windows = self.windows_flat[self.row_start[envs] + row]
        return (windows & (self.piece_masks[piece] << (col + 1))) == 0

    def _hard_drop(self, envs):
        """Move down as far as possible (the lock happens with gravity's locks)."""
        if envs.size == 0:
            return
        row = self.piece_row[envs]
        mask = self.piece_masks[self.deck[envs, 0] * 4 + self.piece_rot[envs]] << (self.piece_col[envs] + 1)
        below = np.arange(self.n_rows + 1) > row[:, None]
        blocked = ((self.windows[envs] & mask[:, None]) != 0) & below
        landing = blocked.argmax(axis=1) - 1  # the floor rows guarantee a blocked row exists
        self.score[envs] += HARD_DROP_SCORE_PER_ROW * (landing - row)
        self.rewards[envs] += HARD_DROP_REWARD_PER_ROW * (landing - row)
        self.piece_row[envs] = landing

    def _hold(self, envs):
        """Swap the falling piece with the held one (or the next one), if it fits at spawn."""
        incoming = np.where(self.hold[envs] >= 0, self.hold[envs], self.deck[envs, 1])
        fits = self._fits(envs, incoming * 4, 0, self.spawn_col)
        envs = envs[fits]
        incoming = incoming[fits]
        was_empty = envs[self.hold[envs] < 0]
        self.hold[envs] = self.deck[envs, 0]
        self.deck[envs, 0] = incoming
        self._advance_deck(was_empty)  # the next piece came out of the deck: shift it and draw
        self._place_at_spawn(envs)
        self.can_hold[envs] = False
        self._write_deck(envs)

    def _lock(self, envs):
        """Write the pieces of `envs` into their boards, clear full rows, spawn; return games lost."""
        piece = self.deck[envs, 0] * 4 + self.piece_rot[envs]
        mask = self.piece_masks[piece] << (self.piece_col[envs] + 1)
        lanes = ((mask[:, None] >> (LANE * np.arange(4))) & FULL_LANE).astype(np.uint16)
        self.rows_flat[(self.row_start[envs] + self.piece_row[envs])[:, None] + np.arange(4)] |= lanes
        # Its 4 cells turn from empty (erased at the start of the step) to locked; the rest of the
        # observed board changes only if rows are cleared.
        self.obs_flat[self._piece_cells(envs)] = 1.0
        full = np.take(self.rows, envs, axis=0)[:, : self.n_rows] == FULL_LANE
        cleared = full.sum(axis=1)
        clearing = np.flatnonzero(cleared)
        if clearing.size:
            # A stable sort puts the full rows first, keeping the order of the others; the full
            # rows then become empty rows at the top.
            order = np.argsort(~full[clearing], axis=1, kind="stable")
            games = envs[clearing]
            kept = np.take_along_axis(self.rows[games, : self.n_rows], order, axis=1)
            emptied = np.arange(self.n_rows) < cleared[clearing, None]
            self.rows[games, : self.n_rows] = np.where(emptied, self.empty_rows[: self.n_rows], kept)
        self.score[envs] += LINE_CLEAR_SCORE[cleared]
        self.rewards[envs] += LINE_CLEAR_REWARD[cleared]
        self.lines[envs] += cleared
        self.clears[envs] += cleared > 0
        self._write_board(envs[clearing])
        self._advance_deck(envs)
        self._place_at_spawn(envs)
        self.can_hold[envs] = True
        self._write_deck(envs)
        return envs[~self._fits(envs, self.deck[envs, 0] * 4, 0, self.spawn_col)]

    def _advance_deck(self, envs):
        deck = np.empty((envs.size, self.deck_size + 1), np.int64)
        deck[:, :-1] = np.take(self.deck, envs, axis=0)[:, 1:]
        deck[:, -1] = self.rng.integers(0, NUM_PIECES, envs.size)
        self.deck[envs] = deck

    def _place_at_spawn(self, envs):
        self.piece_row[envs] = 0
        self.piece_col[envs] = self.spawn_col
        self.piece_rot[envs] = 0
        self.tick_fall[envs] = 0

    def _new_games(self, envs):
        self.rows[envs] = self.empty_rows
        self.deck[envs] = self.rng.integers(0, NUM_PIECES, (envs.size, self.deck_size + 1))
        self.hold[envs] = -1
        self.can_hold[envs] = True
        self._place_at_spawn(envs)
        self.ep_return[envs] = 0.0
        for counter in (self.tick, self.score, self.lines, self.clears, self.soft_drops, self.hard_drops, self.rotates):
            counter[envs] = 0
        self.observations[envs] = 0
        self._draw_pieces(envs)
        self._write_scalars(envs)
        self._write_deck(envs)

    # ----- observation and logs -----

    def _write_board(self, envs):
        cells = (self.rows[envs, : self.n_rows, None] & self.cell_bits) != 0
        self.observations[envs, : self.num_cells] = cells.reshape(len(envs), self.num_cells)

    def _piece_cells(self, envs):
        """Flat observation indices of the falling pieces' cells, (len(envs), 4)."""
        corner = self.obs_row_start[envs] + self.piece_row[envs] * self.n_cols + self.piece_col[envs]
        # np.take(table, rows, axis=0), not table[rows]: numpy's fancy indexing gathers a 2-D array's rows more slowly.
        # With those in _lock, _advance_deck, _write_deck, the env steps faster (bench_tetris_env.py --fancy-indexing
        # times both forms); a Tetris script's default run, where the env is a small share of a step, gains nothing
        # measurable: they are kept for the env's own speed, which the comparison with Ocean's measures
        # (docs/benchmarks.md)
        return corner[:, None] + np.take(self.cell_offsets, self.deck[envs, 0] * 4 + self.piece_rot[envs], axis=0)

    def _draw_pieces(self, envs):
        cells = self._piece_cells(envs)
        self.obs_flat[cells] = 0.5
        self.drawn_cells[envs] = cells

    def _write_scalars(self, envs):
        at = self.scalars_at
        self.observations[envs, at] = self.tick[envs] / self.max_ticks
        self.observations[envs, at + 1] = self.tick_fall[envs] / TICKS_PER_FALL
        self.observations[envs, at + 2] = self.piece_row[envs] / self.n_rows
        self.observations[envs, at + 3] = self.piece_col[envs] / self.n_cols
        self.observations[envs, at + 4] = self.piece_rot[envs] / 3
        self.observations[envs, at + 5] = self.can_hold[envs]

    def _write_deck(self, envs):
        """Rewrite the one-hots: deck[:, :deck_size] then the hold (all zeros when empty)."""
        at = self.one_hots_at
        k = self.deck_size
        self.observations[envs, at:] = 0
        slots = np.take(self.deck, envs, axis=0)  # deck[envs, :k], then the hold in place of the last
        slots[:, k] = self.hold[envs]
        index = self.obs_row_start[envs, None] + at + NUM_PIECES * np.arange(k + 1) + slots
        self.obs_flat[index[slots >= 0]] = 1.0

    def _record_episodes(self, envs):
        ticks = self.tick[envs]
        lines = self.lines[envs]
        clears = self.clears[envs]
        stats = {
            "score": self.score[envs],
            "perf": self.score[envs] / PERF_SCORE,
            "ep_length": ticks,
            "ep_return": self.ep_return[envs],
            "lines_deleted": lines,
            "avg_combo": np.where(clears > 0, lines / np.maximum(clears, 1), 1.0),
            "atn_frac_soft_drop": self.soft_drops[envs] / ticks,
            "atn_frac_hard_drop": self.hard_drops[envs] / ticks,
            "atn_frac_rotate": self.rotates[envs] / ticks,
        }
        for key, values in stats.items():
            self.stat_sums[key] += float(values.sum())
        self.episodes_since_log += envs.size

    def _infos(self):
        self.steps_since_log += 1
        if self.steps_since_log < self.log_interval or self.episodes_since_log == 0:
            return []
        n = self.episodes_since_log
        info = {key: total / n for key, total in self.stat_sums.items()}
        info["n"] = n
        self.steps_since_log = 0
        self.stat_sums = dict.fromkeys(EPISODE_STATS, 0.0)
        self.episodes_since_log = 0
        return [info]


def merge_infos(infos: list) -> dict:
    """Tetris reports means over the games ended since its last report and their count n: the mean over
    several reports weights each by its n."""
    total = sum(info["n"] for info in infos)
    return {key: sum(info[key] * info["n"] for info in infos) / total for key in infos[0] if key != "n"}


def watch(act, seed: int, max_ticks: int, fps: float) -> dict:
    """Plays one game in the terminal, `fps` frames a second, its final position included (the env starts
    the next game in the step that ends one); `act(observations)` returns the action. The game's stats."""
    game = Tetris(num_envs=1, seed=seed, max_ticks=max_ticks, log_interval=1)
    game.reset(seed=seed)
    while True:
        print("\033[H\033[2J" + game.render(), flush=True)  # home + clear screen
        time.sleep(1.0 / fps)
        _, _, terminated, truncated, infos = game.step(np.asarray(act(game.observations), dtype=np.int32))
        if terminated[0] or truncated[0]:
            end = "game over" if terminated[0] else f"truncated at --max-ticks {max_ticks}"
            info = infos[0]
            print(
                "\033[H\033[2J" + game.render_final() + f"\n{end}: {info['ep_length']:.0f} steps, score "
                f"{info['score']:.0f}, lines {info['lines_deleted']:.0f}, return {info['ep_return']:.2f}",
                flush=True,
            )
            return info


# No script or benchmark here uses this class (the scripts step the vectorized Tetris); it is kept for users:
# docs/tetris.md tells them that gymnasium.make("PufferTetris-v0") works after `import common.tetris`.
# tests/test_tetris.py checks that promise: test_gymnasium_registration_and_checker,
# test_gym_env_rejects_float_actions.
class TetrisGymEnv(gymnasium.Env):
    """One game behind the standard Gymnasium API (registered as "PufferTetris-v0").

    Unlike the vectorized env it does not reset itself: the step that ends a game returns that game's
    last observation, and the caller resets. info holds the episode's stats on that step.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 10}

    def __init__(self, render_mode=None, **tetris_kwargs):
        self.game = Tetris(num_envs=1, log_interval=1, **tetris_kwargs)
        self.observation_space = self.game.single_observation_space
        self.action_space = self.game.single_action_space
        self.render_mode = render_mode
        self.action = np.zeros(1, dtype=np.int32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.game.rng = self.np_random  # one generator, seeded the Gymnasium way
        observations, _ = self.game.reset()
        return observations[0].copy(), {}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action must be an integer in [0, {NUM_ACTIONS - 1}], got {action!r}")
        self.action[0] = action
        observations, rewards, terminals, truncations, infos = self.game.step(self.action)
        ended = terminals[0] or truncations[0]
        observation = (self.game.final_observations if ended else observations)[0].copy()
        return observation, float(rewards[0]), bool(terminals[0]), bool(truncations[0]), infos[0] if infos else {}

    def render(self):
        return self.game.render()


# ----- many games as one vector env, in this process or in worker processes (common/vector.py) -----


def tetris_sharing_final_obs(final_obs_buffer, slot, buf=None, seed=0, **tetris_kwargs):
    """A Tetris whose `final_observations` rows live in `final_obs_buffer` (shared memory), so the
    learner can read them even when the env steps in a Multiprocessing worker."""
    env = Tetris(buf=buf, seed=seed, **tetris_kwargs)
    rows = np.frombuffer(final_obs_buffer, dtype=np.float32).reshape(-1, *env.single_observation_space.shape)
    env.final_observations = rows[slot * env.num_agents : (slot + 1) * env.num_agents]
    return env


def make_tetris_vecenv(backend: str, num_envs: int, num_workers: int, seed: int, **tetris_kwargs):
    """`num_workers` Tetris objects of `num_envs // num_workers` games each, stepped in this process
    (backend "Serial") or one sleeping worker process each ("Multiprocessing", common/vector.py: a worker
    that dies ends the run with a message naming it; workers die with the learner). Synchronous use:
    `reset(seed)`, `step(actions)`.

    Tetris keeps the last observation of ended games in the env object, which with Multiprocessing is in
    another process; each env here writes them into one shared array instead, readable as
    `vecenv.final_observations` (num_envs, obs_size), valid on the rows that ended on the last step.
    """
    if num_workers < 1 or num_envs < 1:
        raise ValueError(f"--num-envs and --num-workers must be at least 1 (got {num_envs}, {num_workers})")
    if num_envs % num_workers:
        raise ValueError(f"--num-envs {num_envs} must be divisible by --num-workers {num_workers}")
    obs_size = Tetris(num_envs=1, **tetris_kwargs).single_observation_space.shape[0]
    final_obs_buffer = multiprocessing.RawArray("f", num_envs * obs_size)
    vecenv = vector.make(
        [tetris_sharing_final_obs] * num_workers,
        [[final_obs_buffer, i] for i in range(num_workers)],
        dict(num_envs=num_envs // num_workers, **tetris_kwargs),
        backend=backend,
        num_envs=num_workers,
        num_workers=num_workers,
        num_groups=1,
        seed=seed,
    )
    vecenv.final_observations = np.frombuffer(final_obs_buffer, dtype=np.float32).reshape(num_envs, obs_size)
    return vecenv


if "PufferTetris-v0" not in gymnasium.registry:
    gymnasium.register(id="PufferTetris-v0", entry_point=f"{__name__}:TetrisGymEnv", max_episode_steps=None)
