CREATE TABLE IF NOT EXISTS blocks AS blocks_local ENGINE = Distributed(memscope, default, blocks_local, rank);
CREATE TABLE IF NOT EXISTS rank_summary AS rank_summary_local ENGINE = Distributed(memscope, default, rank_summary_local, rank);
CREATE TABLE IF NOT EXISTS sites AS sites_local ENGINE = Distributed(memscope, default, sites_local, rank);
CREATE TABLE IF NOT EXISTS steps AS steps_local ENGINE = Distributed(memscope, default, steps_local, rank);
