-- Counts of what left the store, for /metrics' counters (issue 18).
--
-- A Prometheus counter must never fall, but the history it would be read
-- from is pruned: a count of done items falls when the pruner deletes old
-- ones, a count of dead items when a person retries or deletes one, and the
-- retries per minute (docket_minute_counts, 0009) are pruned after a day.
-- So each statement that takes finished items (or retry counts) out of the
-- store adds, in the same statement, how many it took to this table, by kind:
-- the pruner (done, dead, cancelled past their retention; retry counts older
-- than a day), `dead retry` and `dead delete` (dead items). Then, read in one
-- snapshot, stored + left is every item that ever finished in a state (and
-- every retry), and it only grows: docket_finished_total and
-- docket_retried_total in /metrics.
--
-- Not counted: items a retention of 0 deletes at their complete (nothing is
-- kept, and a count written by every complete would put a row lock that all
-- workers of a kind share on the hot path).
--
-- At most four rows per kind; each prune or dead action updates one per kind
-- it touched.
CREATE TABLE docket_counts (
  kind text   NOT NULL,
  what text   NOT NULL CHECK (what IN ('done', 'dead', 'cancelled', 'retried')),
  n    bigint NOT NULL CHECK (n >= 0),
  PRIMARY KEY (kind, what)
);
