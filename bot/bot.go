package bot

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/approval"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/console"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/turn"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/mcp"
	"github.com/hookroom/hookroom/plugins"
	"github.com/hookroom/hookroom/policy"
	"github.com/hookroom/hookroom/prefs"
	"github.com/hookroom/hookroom/schedule"
	"github.com/hookroom/hookroom/team"
	"github.com/hookroom/hookroom/trace"
	"github.com/hookroom/hookroom/tracking"
	tokens "github.com/hookroom/hookroom/usage" // "usage" is the CLI text in main.go
)

// Options adjust a Bot beyond what config.yaml says. The zero value is what
// production uses.
type Options struct {
	// Registry, when set, is the hook registry put in service at start-up
	// instead of one built from config.yaml's plugins (tests use it to
	// register Go hooks directly).
	Registry func(hooks.Services) (*hooks.Registry, error)
	// AfterRecord is called after an inbound event was written to the
	// inbox and before it is handled (crash tests kill the process here).
	AfterRecord func(ev *event.Event)
	// Watch reloads config.yaml and the plugin directories when they change
	// (hookroom run turns it on).
	Watch bool
	// Inspect prepares a bot that is only looked at, never run (hookroom
	// check, hooks and tools): its database is opened without the lock that
	// keeps a second server off it, so it works next to a running hookroom.
	Inspect bool
	// ConfigOptions are passed to config.Load when the configuration is
	// loaded again (tests substitute the environment).
	ConfigOptions []config.Option
	// PlaceholderDelay and EditInterval pace the delivery of replies
	// (defaults 400ms and 1s): a reply complete within PlaceholderDelay is
	// sent as one message; a slower one gets a placeholder edited at most
	// once per EditInterval while the model streams.
	PlaceholderDelay time.Duration
	EditInterval     time.Duration
	// Logs, when set, keeps the recent log lines for the console's logs
	// page (the logger writes to it; see NewLogger).
	Logs *console.LogBuffer
}

// Bot is one running hookroom server: the router and agent accounts, their
// sync loops, the inbox and the hook registry in service.
type Bot struct {
	cfg  *config.Config
	opts Options
	log  zerolog.Logger

	db    *Database
	mx    *matrixio.Manager
	track *tracking.Store

	router *matrixio.Account
	// state is what a reload replaces as a whole: readers load it once per
	// use and never see a half-applied configuration.
	state atomic.Pointer[world]

	services *hostServices
	dispatch *dispatcher
	// invited are the rooms accounts joined on a person's invite; unlike
	// the world's rooms they outlive reloads.
	invited invitedRooms

	history       *agents.History
	usage         *tokens.Store
	sched         *schedule.Store
	schedRunner   *schedule.Runner
	approvals     *approval.Store
	pairings      *policy.Store // DM pairing codes and pairings
	prefs         *prefs.Store  // what people set from chat (!model)
	teams         *team.Store   // the steps of team runs and delegations
	traces        *trace.Store  // turn traces (the console's inspector)
	traceW        *traceWriter  // saves them; nil until Run starts it
	approvalWaits approvalWaiters
	turns         turn.Queues
	turnsByEvent  turn.Index
	deps          *turn.Deps // what every turn shares (newTurnDeps)
	syncs         syncLoops
	typing        sync.WaitGroup // typing requests still running (see typingNotice)
	reloadMu      sync.Mutex

	readyMu sync.Mutex
	ready   map[id.UserID]bool

	ops operations // metrics and the HTTP listener (operate.go)

	// fetchMedia, when set, downloads attachments instead of the router
	// account (unit tests).
	fetchMedia func(ctx context.Context, ref matrixio.MediaRef, limit int64) ([]byte, error)
}

// world is the configuration in service and everything derived from it.
// It is immutable once published; a reload builds a new one.
type world struct {
	cfg      *config.Config
	agents   map[hooks.AgentName]*matrixio.Account
	accounts map[id.UserID]entity            // every managed account
	rooms    map[string]id.RoomID            // config room key → id
	joined   map[hooks.AgentName][]id.RoomID // configured rooms (Bot.invited has the others)
	// fresh lists the rooms provisionRooms had to provision (by tracking
	// key); the others were remembered and still joined.
	fresh   []string
	models  map[string]agents.Model
	specs   map[string]agents.ModelSpec
	plugins *plugins.Set // nil when Options.Registry replaced plugin loading
	// reg is the hook registry of plugins: a reload swaps it with the rest
	// of the world, so that what an event sees of the configuration and of
	// the hooks is always one snapshot.
	reg *hooks.Registry
	// tools are each agent's effective tools (resolveTools).
	tools map[hooks.AgentName][]ToolInfo
	// mcp is the MCP servers of cfg (nil: none loaded); mcpTools follows
	// their tool lists (effectiveTools).
	mcp      *mcp.Set
	mcpTools mcpToolState
	// policy decides who each agent answers (buildPolicy); limits are the
	// message rate limits, shared with the next world while rate_limits
	// stays the same.
	policy *policy.Policy
	limits *policy.Limits
}

// withoutAccounts returns a copy of w without accounts and rooms, for
// startAccounts and provisionRooms to fill before it is published.
func (w *world) withoutAccounts() *world {
	return &world{
		cfg: w.cfg, models: w.models, specs: w.specs, plugins: w.plugins, reg: w.reg, tools: w.tools, mcp: w.mcp,
		policy: w.policy, limits: w.limits,
		mcpTools: mcpToolState{version: w.mcpTools.version},
		agents:   map[hooks.AgentName]*matrixio.Account{}, accounts: map[id.UserID]entity{},
		rooms: map[string]id.RoomID{}, joined: map[hooks.AgentName][]id.RoomID{},
	}
}

// w returns the world in service.
func (b *Bot) w() *world { return b.state.Load() }

// entity is a managed Matrix account: the router or an agent.
type entity struct {
	name    hooks.AgentName
	router  bool
	account *matrixio.Account
}

// New prepares a bot for cfg: it opens the database and builds the hook
// registry, but does not talk to the homeserver yet (Run does).
func New(ctx context.Context, cfg *config.Config, opts Options) (*Bot, error) {
	b := &Bot{opts: opts, log: *zerolog.Ctx(ctx), ready: map[id.UserID]bool{}}
	// The authorization policy's settings are checked with config.yaml's
	// own, also on every reload and in the console's editor.
	b.opts.ConfigOptions = append(slices.Clip(opts.ConfigOptions), config.WithValidator(checkPolicy), config.WithValidator(checkTeams))
	if errs := append(checkPolicy(cfg), checkTeams(cfg)...); len(errs) > 0 {
		return nil, errs
	}
	// The first world is built here and published once, complete, at the
	// end (Run publishes it again with the accounts and rooms); nothing
	// writes to a published world.
	w := &world{cfg: cfg}
	// closeWith releases what New acquired so far, w's plugins and MCP
	// servers included.
	closeWith := func(err error) error {
		b.state.Store(w)
		b.Close()
		return err
	}
	b.services = &hostServices{b: b}
	if cfg.Matrix.ServerName == "" {
		return nil, cfg.Errorf("matrix.server_name", "is required (the server part of user ids, e.g. example.org for @alice:example.org)")
	}
	db, err := openDatabase(ctx, cfg, !opts.Inspect)
	if err != nil {
		return nil, err
	}
	b.db = db
	store := matrixio.NewStore(db.Database)
	if err := store.Upgrade(ctx); err != nil {
		return nil, closeWith(fmt.Errorf("failed to upgrade matrix store: %w", err))
	}
	b.track = tracking.New(db.Database)
	if err := b.track.Upgrade(ctx); err != nil {
		return nil, closeWith(fmt.Errorf("failed to upgrade tracking store: %w", err))
	}
	if err := b.loadInvitedRooms(ctx); err != nil {
		return nil, closeWith(err)
	}
	b.history = agents.NewHistory(db.Database)
	if err := b.history.Upgrade(ctx); err != nil {
		return nil, closeWith(fmt.Errorf("failed to upgrade history store: %w", err))
	}
	b.usage = tokens.New(db.Database)
	if err := b.usage.Upgrade(ctx); err != nil {
		return nil, closeWith(err)
	}
	b.sched = schedule.NewStore(db.Database)
	if err := b.sched.Upgrade(ctx); err != nil {
		return nil, closeWith(err)
	}
	b.schedRunner = schedule.NewRunner(b.sched, b.fireSchedule)
	b.schedRunner.Grace = b.scheduleGrace
	b.approvals = approval.New(db.Database)
	if err := b.approvals.Upgrade(ctx); err != nil {
		return nil, closeWith(err)
	}
	b.teams = team.NewStore(db.Database)
	if err := b.teams.Upgrade(ctx); err != nil {
		return nil, closeWith(err)
	}
	b.prefs = prefs.New(db.Database)
	if err := b.prefs.Upgrade(ctx); err != nil {
		return nil, closeWith(err)
	}
	b.pairings = policy.NewStore(db.Database)
	if err := b.pairings.Upgrade(ctx); err != nil {
		return nil, closeWith(err)
	}
	b.traces = trace.New(db.Database)
	if err := b.traces.Upgrade(ctx); err != nil {
		return nil, closeWith(err)
	}
	if w.models, w.specs, err = buildModels(cfg); err != nil {
		return nil, closeWith(err)
	}
	b.ops.metrics = b.newMetrics()
	mc := matrixConfig(cfg)
	mc.Retry.Observer = retryObserver{b.ops.metrics}
	mx, err := matrixio.NewManager(mc, store)
	if err != nil {
		return nil, closeWith(fmt.Errorf("failed to set up matrix accounts: %w", err))
	}
	b.mx = mx
	reg, err := b.buildRegistry(ctx, w)
	if err != nil {
		return nil, closeWith(err)
	}
	w.reg = reg
	if w.mcp, err = b.loadMCP(ctx, cfg, nil, false); err != nil {
		return nil, closeWith(err)
	}
	if err := applyTools(ctx, w); err != nil {
		return nil, closeWith(err)
	}
	// Room references of reply_to resolve once Run has provisioned the
	// rooms (buildPolicy); until then only room ids do.
	if w.policy, err = policy.New(policyOptions(cfg.Authorization), nil); err != nil {
		return nil, closeWith(err)
	}
	if w.limits, err = policy.NewLimits(rateLimits(cfg.RateLimits)); err != nil {
		return nil, closeWith(err)
	}
	b.state.Store(w)
	b.deps = b.newTurnDeps()
	b.dispatch = newDispatcher(b)
	return b, nil
}

// Close releases what New acquired (plugin processes, the database) for a
// bot that is not run. Run closes them itself when it returns.
func (b *Bot) Close() {
	if w := b.w(); w != nil && w.plugins != nil {
		_ = w.plugins.Close()
	}
	if w := b.w(); w != nil {
		_ = w.mcp.Close()
	}
	if b.db != nil {
		_ = b.db.Close()
	}
}

// matrixConfig maps config.yaml's matrix section onto matrixio's.
func matrixConfig(cfg *config.Config) matrixio.Config {
	return matrixio.Config{
		HomeserverURL: cfg.Matrix.Homeserver,
		ServerName:    cfg.Matrix.ServerName,
		Registration: matrixio.Registration{
			SharedSecret:    cfg.Matrix.Registration.SharedSecret.Reveal(),
			Token:           cfg.Matrix.Registration.Token.Reveal(),
			AppServiceToken: cfg.Matrix.Registration.AppService.ASToken.Reveal(), // issue 22: appservice accounts
		},
		TimelineLimit: cfg.Matrix.SyncTimelineLimit,
		Encryption:    matrixEncryption(cfg.Matrix.Encryption),
	}
}

// buildRegistry builds the hook registry for w, the first world, and
// loads its plugins into it.
func (b *Bot) buildRegistry(ctx context.Context, w *world) (*hooks.Registry, error) {
	if b.opts.Registry != nil {
		reg, err := b.opts.Registry(b.services.bind())
		if err != nil {
			return nil, fmt.Errorf("failed to build hook registry: %w", err)
		}
		return reg, nil
	}
	set, reg, err := b.loadPlugins(ctx, w.cfg, nil, false)
	if err != nil {
		return nil, err
	}
	w.plugins = set
	return reg, nil
}

// Registry returns the hook registry in service.
func (b *Bot) Registry() *hooks.Registry { return b.w().reg }

// Run logs in every account, provisions the configured rooms, starts the
// sync loops and handles events until ctx ends; then it stops in order
// (agent:stopped while the accounts can still send) and closes the
// database.
func (b *Bot) Run(ctx context.Context) error {
	ctx = b.log.WithContext(ctx)
	defer b.db.Close()
	defer b.mx.Close()
	if err := b.startHTTP(ctx); err != nil {
		return err
	}
	defer b.stopHTTP()
	// A standby (database.standby) waits here until it holds the database
	// (standby.go); the run ends when the lock is lost.
	ctx, err := b.takeOver(ctx)
	if err != nil {
		return err
	}
	// The accounts and rooms go into a copy of the world New published,
	// published once they are complete (the HTTP listener reads the world
	// meanwhile).
	w := b.w().withoutAccounts()
	start := time.Now()
	if err := b.startAccounts(ctx, w, &world{}); err != nil {
		return err
	}
	b.log.Info().Int("accounts", len(w.accounts)).Dur("took", time.Since(start)).Msg("accounts started")
	if err := b.provisionRooms(ctx, w); err != nil {
		return err
	}
	if err := b.buildPolicy(ctx, w, nil); err != nil {
		return err
	}
	b.state.Store(w)
	b.mx.SetVerification(b.verificationPolicy()) // verify.go
	b.emitLifecycle(ctx, hooks.AgentStarted, "")

	// Turn traces are saved from before the first turn (a replayed one)
	// until after the last ended (the deferred close runs after
	// b.turns.wait below), before the database closes.
	b.traceW = newTraceWriter(b.traces, b.log)
	go b.traceW.run(context.WithoutCancel(ctx), func() time.Duration { return b.w().cfg.Traces.Retention.Std() })
	defer b.traceW.close()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := b.dispatch.replay(runCtx); err != nil {
		return err
	}
	b.ops.running.Store(true) // readiness now waits for each account's first sync
	b.syncs.start(runCtx, cancel)
	for _, e := range b.w().accounts {
		b.syncs.add(b, e)
	}
	go b.prune(runCtx)
	setPresence(runCtx, b.w().accounts, event.PresenceOnline)
	schedDone := make(chan struct{})
	go func() { defer close(schedDone); b.runSchedules(runCtx) }()
	var watchDone chan struct{}
	if b.opts.Watch {
		watchDone = make(chan struct{})
		go func() { defer close(watchDone); b.watch(runCtx) }()
	}
	b.log.Info().Int("accounts", len(b.w().accounts)).Int("rooms", len(b.w().rooms)).Msg("hookroom is running")
	<-runCtx.Done()
	<-schedDone
	b.ops.stopping.Store(true) // not ready from here on
	b.ops.running.Store(false)
	if watchDone != nil {
		<-watchDone
	}
	b.reloadMu.Lock() // no reload in flight from here on
	defer b.reloadMu.Unlock()
	b.syncs.wait()
	b.dispatch.stop()
	b.turns.Wait()
	b.typing.Wait() // the last "stopped typing" requests of the turns

	// Orderly shutdown: the accounts can still send while agent:stopped runs.
	stopCtx, stopCancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer stopCancel()
	b.emitLifecycle(stopCtx, hooks.AgentStopped, "shutdown")
	setPresence(stopCtx, b.w().accounts, event.PresenceOffline)
	if set := b.w().plugins; set != nil {
		_ = set.Close()
	}
	_ = b.w().mcp.Close()
	b.log.Info().Msg("hookroom stopped")
	if err := lockLost(ctx); err != nil {
		return err
	}
	return b.syncs.err()
}

// startAccounts logs in (or creates) the router, unless it runs already,
// and every agent account of w's configuration, reusing the accounts of
// prev whose agent keeps its username and display name.
func (b *Bot) startAccounts(ctx context.Context, w, prev *world) error {
	if b.router == nil {
		spec, err := routerSpec(w.cfg)
		if err != nil {
			return err
		}
		router, err := b.mx.EnsureAccount(ctx, spec)
		if err != nil {
			return fmt.Errorf("failed to start the router account: %w", err)
		}
		b.router = router
	}
	w.accounts[b.router.UserID()] = entity{name: hooks.RouterName, router: true, account: b.router}
	for _, name := range w.cfg.AgentNames() {
		a := w.cfg.Agents[name]
		spec, err := agentSpec(w.cfg, name)
		if err != nil {
			return err
		}
		if old, ok := prev.agents[hooks.AgentName(name)]; ok {
			pa := prev.cfg.Agents[name]
			if pa.Username == a.Username && pa.Account == a.Account {
				// The same account: only its profile may have changed.
				if pa.DisplayName != a.DisplayName || pa.Avatar != a.Avatar {
					if err := old.SetProfile(ctx, profileOf(spec)); err != nil {
						return fmt.Errorf("failed to update the profile of agent %s: %w", name, err)
					}
				}
				w.agents[hooks.AgentName(name)] = old
				w.accounts[old.UserID()] = entity{name: hooks.AgentName(name), account: old}
				continue
			}
		}
		acct, err := b.mx.EnsureAccount(ctx, spec)
		if err != nil {
			return fmt.Errorf("failed to start the account of agent %s: %w", name, err)
		}
		w.agents[hooks.AgentName(name)] = acct
		w.accounts[acct.UserID()] = entity{name: hooks.AgentName(name), account: acct}
	}
	return nil
}

// Handled inbox entries are kept for a week (for diagnosis), then pruned.
const (
	inboxRetention = 7 * 24 * time.Hour
	pruneInterval  = 6 * time.Hour
)

// prune deletes old handled inbox entries now and then, until ctx ends.
func (b *Bot) prune(ctx context.Context) {
	for {
		if n, err := b.track.Prune(ctx, inboxRetention); err != nil {
			if ctx.Err() == nil {
				zerolog.Ctx(ctx).Warn().Err(err).Msg("failed to prune the inbox")
			}
		} else if n > 0 {
			zerolog.Ctx(ctx).Debug().Int64("events", n).Msg("pruned handled inbox entries")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pruneInterval):
		}
	}
}

// invitePeople invites the configured people who are neither in the room
// nor invited yet.
func (b *Bot) invitePeople(ctx context.Context, room id.RoomID, users []id.UserID) error {
	for _, u := range users {
		m, err := b.router.Membership(ctx, room, u)
		if err != nil {
			return err
		}
		if m == event.MembershipJoin || m == event.MembershipInvite || m == event.MembershipBan {
			continue
		}
		if err := b.router.Invite(ctx, room, u); err != nil {
			return err
		}
		zerolog.Ctx(ctx).Info().Stringer("user", u).Stringer("room_id", room).Msg("invited")
	}
	return nil
}

func isConfiguredRef(cfg *config.Config, ref string) bool {
	for _, key := range cfg.RoomKeys() {
		r := cfg.Rooms[key]
		if string(r.FullAlias(cfg.Matrix.ServerName)) == ref || (r.ID != "" && string(r.ID) == ref) {
			return true
		}
	}
	return false
}

func refSpec(ref string) matrixio.RoomSpec {
	if len(ref) > 0 && ref[0] == '!' {
		return matrixio.RoomSpec{ID: id.RoomID(ref)}
	}
	return matrixio.RoomSpec{Alias: id.RoomAlias(ref), Encrypted: true}
}

// emitLifecycle fires agent:started, agent:stopped or bot:ready for every
// managed account.
func (b *Bot) emitLifecycle(ctx context.Context, ev hooks.Event[hooks.AgentLifecycleContext], stopReason string) {
	w := b.w()
	for _, e := range b.entities(w) {
		b.emitLifecycleFor(ctx, w, ev, e, stopReason)
	}
}

func (b *Bot) emitLifecycleFor(ctx context.Context, w *world, ev hooks.Event[hooks.AgentLifecycleContext], e entity, stopReason string) {
	reg := w.reg
	if !reg.Has(ev.Name()) {
		return
	}
	c := &hooks.AgentLifecycleContext{
		Agent: e.name, EntityType: "agent", UserID: e.account.UserID(),
		JoinedRooms: b.joinedRooms(w, e), StopReason: stopReason,
	}
	if e.router {
		c.EntityType = "router"
	} else {
		c.Rooms = w.cfg.Agents[string(e.name)].Rooms
	}
	c.CorrelationID = fmt.Sprintf("%s:%s", ev.Name(), e.name)
	turn.Emit(ctx, reg, ev, c)
}

// entities lists the managed accounts, router first, then agents by name.
func (b *Bot) entities(w *world) []entity {
	out := []entity{w.accounts[b.router.UserID()]}
	for _, name := range w.cfg.AgentNames() {
		out = append(out, w.accounts[w.agents[hooks.AgentName(name)].UserID()])
	}
	return out
}

// isManaged reports whether user is the router, an agent or a configured
// bot account: hookroom never treats their messages and joins as people's.
func (w *world) isManaged(user id.UserID) bool {
	if _, ok := w.accounts[user]; ok {
		return true
	}
	for _, u := range w.cfg.Matrix.BotAccounts {
		if u == user {
			return true
		}
	}
	return false
}
