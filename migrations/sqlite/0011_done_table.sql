-- On SQLite done items stay in docket_items (migrations/pg/0011_done_table.sql
-- moves them to a table of their own on PostgreSQL, where marking a row done
-- in place cost W2 13-16% against deleting it). Here the same UPDATE cost 2-4%
-- (issue 17's measurements, docs/benchmarks.md), and a move would be two
-- statements (SQLite has no DELETE ... RETURNING inside an INSERT).
--
-- The view gives both dialects one name for every item whatever its state:
-- the statements that read by id, list, count and search select from it.
CREATE VIEW docket_items_all AS SELECT * FROM docket_items;
