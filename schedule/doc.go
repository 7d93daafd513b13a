// Package schedule owns scheduled tasks: messages that hookroom posts
// later, once or on a recurring schedule, on behalf of the person (or
// agent) who asked for them.
//
// It has three parts:
//
//   - Parse reads the plain forms people write after !schedule ("in 10
//     minutes …", "tomorrow at 9:00 …", "every weekday at 9:00 …", "every
//     15 minutes …", cron "*/5 * * * *" …) into a Spec and the message
//     text. Cron expressions are parsed by github.com/robfig/cron/v3.
//   - Store keeps the tasks (schedule_task) and every firing
//     (schedule_firing, keyed by task and due time) in hookroom's database,
//     SQLite or PostgreSQL through dbutil, with its own version table
//     (schedule_version).
//   - Runner fires due tasks. Claiming a firing and advancing the task's
//     next run happen in one transaction keyed by (task, due time), so a
//     task fires once per due time whatever restarts happen around it; a
//     firing claimed but not yet delivered is delivered again on the next
//     start (the bot makes that resend idempotent with a transaction id
//     derived from the firing). A task found overdue by more than the
//     missed grace (say, after hookroom was down for a day) is not run but
//     reported as missed.
//
// The package knows nothing of Matrix or hooks beyond id types and
// hooks.AgentName: what a firing does is the bot's Fire function.
package schedule
