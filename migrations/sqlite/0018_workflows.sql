-- Durable workflows (issue 32): as migrations/pg/0018_workflows.sql, which
-- says why; the same tables, SQLite's types.
--
-- An execution is a row here; each run of it (the first, and one per wake-up:
-- a deferred completed, a clock fired, a child finished, a resume, an
-- interrupt) is an ordinary item of the workflow's kind in docket_items, keyed
-- by the execution id: a run waiting is not claimed while another holds a
-- live lease, so two runs of one execution never overlap across processes
-- (src/internal/workflow/runner.ts). A suspended
-- execution is only rows: no item, no lease, no slot, no connection.
--
-- state: 'running' (a run is waiting or running), 'suspended' (none is: it
-- waits for what wakes it), 'complete' (result holds the encoded Result).
-- wakes counts wake-ups: a run that suspends marks the execution suspended
-- only if no wake-up came since it started (so a wake-up during a run is
-- never hidden behind a 'suspended' state).
CREATE TABLE docket_workflow_executions (
  execution_id     TEXT    PRIMARY KEY,
  workflow         TEXT    NOT NULL,
  payload          TEXT    NOT NULL,
  state            TEXT    NOT NULL CHECK (state IN ('running', 'suspended', 'complete')),
  result           TEXT,
  parent_workflow  TEXT,
  parent_execution TEXT,
  wakes            INTEGER NOT NULL DEFAULT 0,
  runs             INTEGER NOT NULL DEFAULT 0,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  completed_at     INTEGER
);

CREATE INDEX docket_workflow_executions_state ON docket_workflow_executions (state, workflow, updated_at);

-- Finished executions by age, for their retention (src/internal/workflow/prune.ts).
CREATE INDEX docket_workflow_executions_finished ON docket_workflow_executions (updated_at)
  WHERE state = 'complete';

CREATE INDEX docket_workflow_executions_parent ON docket_workflow_executions (parent_execution)
  WHERE parent_execution IS NOT NULL;

-- An activity's result by execution, activity name and attempt: written once
-- (the first write wins, so two runs that raced agree on it), read on every
-- replay instead of running the activity again.
CREATE TABLE docket_workflow_activities (
  execution_id TEXT    NOT NULL,
  name         TEXT    NOT NULL,
  attempt      INTEGER NOT NULL,
  result       TEXT    NOT NULL,
  created_at   INTEGER NOT NULL,
  PRIMARY KEY (execution_id, name, attempt)
);

-- A DurableDeferred's exit (and a DurableClock's firing, and the interrupt
-- signal), by execution and name: the first completion wins.
CREATE TABLE docket_workflow_deferreds (
  execution_id TEXT   NOT NULL,
  name         TEXT   NOT NULL,
  exit         TEXT   NOT NULL,
  created_at   INTEGER NOT NULL,
  PRIMARY KEY (execution_id, name)
);

-- A durable clock, scheduled once per execution and clock: a replay that
-- reaches the same DurableClock.sleep finds it here and schedules nothing
-- (its item, of kind docket.workflow.clock, is due at due_at; its firing is
-- the deferred of the clock's name).
CREATE TABLE docket_workflow_clocks (
  execution_id TEXT   NOT NULL,
  name         TEXT   NOT NULL,
  due_at       INTEGER NOT NULL,
  created_at   INTEGER NOT NULL,
  PRIMARY KEY (execution_id, name)
);
