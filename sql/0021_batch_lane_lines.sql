-- Whether a batch has lines marked for a batch lane (0020), written at admission: the live
-- dispatcher's filter and the lane engine look for a batch's lane lines only where there are some,
-- so an ordinary batch pays nothing while a batch lane is open. Admission writes false, then true
-- once a marked line is stored. The default is true, the safe side: a batch stored before, or by
-- an instance of an older release during a rolling upgrade, is looked at as every batch was
-- (a wrong false would leave its marked lines to the live lanes, or held until its deadline).
-- src/store/sqlite/migrations/0021_batch_lane_lines.sql is the twin.
ALTER TABLE batches ADD COLUMN lane_lines boolean NOT NULL DEFAULT true;
