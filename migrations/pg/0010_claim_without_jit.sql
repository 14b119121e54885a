-- The claim is never JIT-compiled.
--
-- With a big backlog (a million waiting items and a million kept done ones)
-- the planner's estimate for the claim's scan of waiting items passes
-- jit_above_cost (100,000 by default), and a server with JIT (on by default
-- since PostgreSQL 12 where LLVM is built in) compiles the statement on every
-- execution: measured here (bench W6, issue 19) 1.3-2.3 s per claim of ten
-- items at 1M + 1M rows, against 2-15 ms without, while reading the ten rows
-- takes 0.1-0.3 ms. JIT pays for long analytical queries; a claim reads a
-- batch from an index and is done, so it is turned off for the claim alone
-- (as enable_bitmapscan is, 0002), whatever the server's or the session's
-- setting. jit is a user setting: no superuser is needed.
ALTER FUNCTION docket_claim_from(text, integer, bigint, text[], boolean) SET jit = off;
ALTER FUNCTION docket_claim(text, integer, bigint, text[], integer) SET jit = off;
