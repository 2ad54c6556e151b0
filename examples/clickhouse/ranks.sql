-- ranks.sql: memscope ranks' figures in ClickHouse SQL (18.16 and later: no window functions
-- needed), over the Distributed tables of distributed.sql. One statement per line.
-- Each rank's peak of the heap and mmap layers together ("host") from its blocks: the running
-- sum of +size at each allocation and -size at each free in event order, and the bytes still
-- live at the end (leaked): what `memscope ranks --json` reports as peak_bytes, leaked_bytes.
SELECT host, rank, arrayReduce('max', arrayCumSum(arrayMap(x -> x.2, arraySort(x -> x.1, groupArray((ev, delta)))))) AS peak_bytes, sumIf(delta, live) AS leaked_bytes FROM (SELECT host, rank, alloc_event AS ev, size AS delta, isNull(free_event) AS live FROM blocks WHERE layer IN ('heap', 'mmap') UNION ALL SELECT host, rank, assumeNotNull(free_event) AS ev, -size AS delta, 0 AS live FROM blocks WHERE layer IN ('heap', 'mmap') AND isNotNull(free_event)) GROUP BY host, rank ORDER BY host, rank
-- The same from rank_summary (computed at export): milliseconds at any number of ranks.
SELECT host, rank, peak_bytes, live_bytes AS leaked_bytes FROM rank_summary WHERE layer = 'host' ORDER BY host, rank
-- The median peak and the median absolute deviation (memscope ranks' outlier rule:
-- |peak - median| > max(3.5 * 1.4826 * MAD, median / 10)).
WITH (SELECT quantileExact(0.5)(peak_bytes) FROM rank_summary WHERE layer = 'host') AS median SELECT median, quantileExact(0.5)(abs(peak_bytes - median)) AS mad FROM rank_summary WHERE layer = 'host'
