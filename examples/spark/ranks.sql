-- ranks.sql: memscope ranks' figures in Spark SQL over a job directory of Parquet tables
-- (docs/columnar.md). Run with: spark-sql --hiveconf job=/path/to/JOB -f ranks.sql
-- (Spark discovers host and rank from the directory names). Not run by memscope's tests (no
-- Spark on the test machines): the first and last queries ran unchanged in DuckDB (memscope sql)
-- on a job of four ranks and gave memscope ranks' figures; ClickHouse's version,
-- examples/clickhouse/ranks.sql, is checked by tests/integration/test_clickhouse.sh.
CREATE TEMPORARY VIEW blocks USING parquet OPTIONS (path '${hiveconf:job}/blocks');
CREATE TEMPORARY VIEW rank_summary USING parquet OPTIONS (path '${hiveconf:job}/rank_summary');
CREATE TEMPORARY VIEW sites USING parquet OPTIONS (path '${hiveconf:job}/sites');

-- Each rank's peak of the heap and mmap layers together, from its blocks: a running sum of
-- +size at each allocation and -size at each free, in event order; and its leaked bytes.
WITH d AS (
  SELECT host, rank, alloc_event AS ev, size AS delta, free_event IS NULL AS live
  FROM blocks WHERE layer IN ('heap', 'mmap')
  UNION ALL
  SELECT host, rank, free_event, -size, false
  FROM blocks WHERE layer IN ('heap', 'mmap') AND free_event IS NOT NULL),
r AS (
  SELECT host, rank, live, delta,
         sum(delta) OVER (PARTITION BY host, rank ORDER BY ev ROWS UNBOUNDED PRECEDING) AS running
  FROM d)
SELECT host, rank, max(running) AS peak_bytes, sum(CASE WHEN live THEN delta ELSE 0 END) AS leaked_bytes
FROM r GROUP BY host, rank ORDER BY host, rank;

-- The same from rank_summary (computed at export), and the outlier rule's median and MAD.
SELECT host, rank, peak_bytes, live_bytes AS leaked_bytes
FROM rank_summary WHERE layer = 'host' ORDER BY host, rank;
WITH r AS (SELECT peak_bytes FROM rank_summary WHERE layer = 'host'),
m AS (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY peak_bytes) AS med FROM r)
SELECT m.med AS median_peak_bytes,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY abs(r.peak_bytes - m.med)) AS mad_bytes
FROM r CROSS JOIN m GROUP BY m.med;
