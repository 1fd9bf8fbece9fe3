// Package jobs is loopd's scheduler of the owner's jobs: the files
// jobs/*.toml (job.go), their schedules (package roleconf/loopd/schedule), loopd's record of
// runs (state.go, loop/jobs.json) and the runs themselves (run.go).
//
// Invariants:
//   - a job file is read only if package ownership's rule holds for it
//     with the owners loopd trusts, and only if it decodes strictly and
//     every value is valid; a file that fails is refused alone, with its
//     reason in bxctl jobs and the log, and every other job still runs;
//   - the directory is read afresh at every tick and each run takes the
//     file as it is when the run starts: an edit applies from the next
//     run, a deleted file never runs again (its record is dropped);
//   - a job runs at most once per tick however many of its times have
//     passed (times missed while loopd was down run once, at start), and
//     never for times before loopd first saw its file;
//   - the run is recorded as under way, durably, before it starts, so a
//     run is never started twice for one time, and one a stopped loopd
//     left under way is shown as interrupted, its log's open turn closed
//     at the next start; a run never reuses a session log on disk;
//   - every run is a session of its own (job-<name>-<n>) on the engine
//     loopd gives it (the background slot), whose tool calls go to
//     brokerd like every other session's: nothing from an earlier run,
//     no decision, taint or pending call, carries into it;
//   - a report leaves loopd only as an answer to gatewayd's
//     job_reports_since (the last wire.MaxJobReports runs whose deliver
//     is Mattermost); where gatewayd may post it is gatewayd's own rule;
//   - the built-in tiering job (tiering.go) writes nothing itself: its
//     proposal is the model's memory tool call, through brokerd;
//   - loopd never writes a job file: it opens them read-only, and the
//     directory is the owner's (package layout).
package jobs
