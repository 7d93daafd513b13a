package bot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/tracking"
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
	// PlaceholderDelay and EditInterval pace the delivery of replies
	// (defaults 400ms and 1s): a reply complete within PlaceholderDelay is
	// sent as one message; a slower one gets a placeholder edited at most
	// once per EditInterval while the model streams.
	PlaceholderDelay time.Duration
	EditInterval     time.Duration
}

// Bot is one running hookroom server: the router and agent accounts, their
// sync loops, the inbox and the hook registry in service.
type Bot struct {
	cfg  *config.Config
	opts Options
	log  zerolog.Logger

	db    *dbutil.Database
	mx    *matrixio.Manager
	track *tracking.Store
	live  hooks.Live

	router *matrixio.Account
	// state is what a reload replaces as a whole: readers load it once per
	// use and never see a half-applied configuration.
	state atomic.Pointer[world]

	services *hostServices
	dispatch *dispatcher

	history      *agents.History
	turns        turnQueues
	turnsByEvent turnIndex

	readyMu sync.Mutex
	ready   map[id.UserID]bool
}

// world is the configuration in service and everything derived from it.
// It is immutable once published; a reload builds a new one.
type world struct {
	cfg      *config.Config
	agents   map[hooks.AgentName]*matrixio.Account
	accounts map[id.UserID]entity // every managed account
	rooms    map[string]id.RoomID // config room key → id
	joined   map[hooks.AgentName][]id.RoomID
	models   map[string]agents.Model
	specs    map[string]agents.ModelSpec
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
	opts.PlaceholderDelay = cmp.Or(opts.PlaceholderDelay, placeholderDelay)
	opts.EditInterval = cmp.Or(opts.EditInterval, editInterval)
	b := &Bot{opts: opts, log: *zerolog.Ctx(ctx), ready: map[id.UserID]bool{}}
	b.state.Store(&world{
		cfg: cfg, agents: map[hooks.AgentName]*matrixio.Account{}, accounts: map[id.UserID]entity{},
		rooms: map[string]id.RoomID{}, joined: map[hooks.AgentName][]id.RoomID{},
	})
	b.services = &hostServices{b: b}
	db, err := OpenDatabase(ctx, cfg)
	if err != nil {
		return nil, err
	}
	b.db = db
	store := matrixio.NewStore(db)
	if err := store.Upgrade(ctx); err != nil {
		return nil, b.closeWith(fmt.Errorf("failed to upgrade matrix store: %w", err))
	}
	b.track = tracking.New(db)
	if err := b.track.Upgrade(ctx); err != nil {
		return nil, b.closeWith(fmt.Errorf("failed to upgrade tracking store: %w", err))
	}
	b.history = agents.NewHistory(db)
	if err := b.history.Upgrade(ctx); err != nil {
		return nil, b.closeWith(fmt.Errorf("failed to upgrade history store: %w", err))
	}
	if b.w().models, b.w().specs, err = buildModels(cfg); err != nil {
		return nil, b.closeWith(err)
	}
	mx, err := matrixio.NewManager(matrixConfig(cfg), store)
	if err != nil {
		return nil, b.closeWith(fmt.Errorf("failed to set up matrix accounts: %w", err))
	}
	b.mx = mx
	reg, err := b.buildRegistry(ctx)
	if err != nil {
		return nil, b.closeWith(err)
	}
	b.live.Store(reg)
	b.dispatch = newDispatcher(b)
	return b, nil
}

func (b *Bot) closeWith(err error) error {
	if b.db != nil {
		_ = b.db.Close()
	}
	return err
}

// matrixConfig maps config.yaml's matrix section onto matrixio's.
func matrixConfig(cfg *config.Config) matrixio.Config {
	return matrixio.Config{
		HomeserverURL: cfg.Matrix.Homeserver,
		ServerName:    cfg.Matrix.ServerName,
		Registration: matrixio.Registration{
			SharedSecret: cfg.Matrix.Registration.SharedSecret.Reveal(),
			Token:        cfg.Matrix.Registration.Token.Reveal(),
		},
		TimelineLimit: cfg.Matrix.SyncTimelineLimit,
	}
}

// buildRegistry builds the hook registry for the current configuration.
func (b *Bot) buildRegistry(ctx context.Context) (*hooks.Registry, error) {
	if b.opts.Registry != nil {
		reg, err := b.opts.Registry(b.services.bind())
		if err != nil {
			return nil, fmt.Errorf("failed to build hook registry: %w", err)
		}
		return reg, nil
	}
	return b.loadPlugins(ctx)
}

// Registry returns the hook registry in service.
func (b *Bot) Registry() *hooks.Registry { return b.live.Load() }

// Run logs in every account, provisions the configured rooms, starts the
// sync loops and handles events until ctx ends; then it stops in order
// (agent:stopped while the accounts can still send) and closes the
// database.
func (b *Bot) Run(ctx context.Context) error {
	ctx = b.log.WithContext(ctx)
	defer b.db.Close()
	defer b.mx.Close()
	if err := b.startAccounts(ctx); err != nil {
		return err
	}
	if err := b.provisionRooms(ctx); err != nil {
		return err
	}
	b.emitLifecycle(ctx, hooks.AgentStarted, "")

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := b.dispatch.replay(runCtx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(b.w().accounts))
	for _, e := range b.w().accounts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := e.account.Run(runCtx, syncSink{b})
			if err != nil && !errors.Is(err, context.Canceled) {
				errs <- fmt.Errorf("sync loop of %s stopped: %w", e.account.UserID(), err)
				cancel()
			}
		}()
	}
	b.log.Info().Int("accounts", len(b.w().accounts)).Int("rooms", len(b.w().rooms)).Msg("hookroom is running")
	<-runCtx.Done()
	wg.Wait()
	b.dispatch.stop()
	b.turns.wait()

	// Orderly shutdown: the accounts can still send while agent:stopped runs.
	stopCtx, stopCancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer stopCancel()
	b.emitLifecycle(stopCtx, hooks.AgentStopped, "shutdown")
	b.log.Info().Msg("hookroom stopped")
	close(errs)
	return <-errs
}

// startAccounts logs in (or creates) the router and every agent account.
func (b *Bot) startAccounts(ctx context.Context) error {
	router, err := b.mx.EnsureAccount(ctx, matrixio.AccountSpec{
		Localpart: b.w().cfg.Matrix.Router.Username, DisplayName: b.w().cfg.Matrix.Router.DisplayName,
	})
	if err != nil {
		return fmt.Errorf("failed to start the router account: %w", err)
	}
	b.router = router
	b.w().accounts[router.UserID()] = entity{name: hooks.RouterName, router: true, account: router}
	for _, name := range b.w().cfg.AgentNames() {
		a := b.w().cfg.Agents[name]
		acct, err := b.mx.EnsureAccount(ctx, matrixio.AccountSpec{Localpart: a.Username, DisplayName: a.DisplayName})
		if err != nil {
			return fmt.Errorf("failed to start the account of agent %s: %w", name, err)
		}
		b.w().agents[hooks.AgentName(name)] = acct
		b.w().accounts[acct.UserID()] = entity{name: hooks.AgentName(name), account: acct}
	}
	return nil
}

// provisionRooms resolves or creates every configured room and joins the
// router and the agents configured for it.
func (b *Bot) provisionRooms(ctx context.Context) error {
	members := map[string][]*matrixio.Account{} // room reference → agent accounts
	for _, name := range b.w().cfg.AgentNames() {
		for _, ref := range b.w().cfg.Agents[name].Rooms {
			members[ref] = append(members[ref], b.w().agents[hooks.AgentName(name)])
		}
	}
	for _, key := range b.w().cfg.RoomKeys() {
		r := b.w().cfg.Rooms[key]
		spec := matrixio.RoomSpec{Alias: r.FullAlias(b.w().cfg.Matrix.ServerName), ID: r.ID, Name: r.Name, Topic: r.Topic}
		var accts []*matrixio.Account
		accts = append(accts, members[key]...)
		accts = append(accts, members[string(spec.Alias)]...)
		if spec.ID != "" {
			accts = append(accts, members[string(spec.ID)]...)
		}
		roomID, err := b.router.EnsureRoom(ctx, spec, accts)
		if err != nil {
			return fmt.Errorf("failed to provision room %s (%s:%d): %w", key, filepath.Base(b.w().cfg.Path), b.w().cfg.Line("rooms."+key), err)
		}
		b.w().rooms[key] = roomID
		if err := b.invitePeople(ctx, roomID, r.Invite); err != nil {
			return fmt.Errorf("failed to invite people to room %s: %w", key, err)
		}
		for _, a := range accts {
			e := b.w().accounts[a.UserID()]
			b.w().joined[e.name] = append(b.w().joined[e.name], roomID)
		}
		b.w().joined[hooks.RouterName] = append(b.w().joined[hooks.RouterName], roomID)
		b.log.Info().Str("room", key).Stringer("room_id", roomID).Int("agents", len(accts)).Msg("room ready")
	}
	// Rooms agents name directly by id or alias, outside the rooms section.
	for ref, accts := range members {
		if _, ok := b.w().cfg.Rooms[ref]; ok || b.isConfiguredRef(ref) {
			continue
		}
		roomID, err := b.router.EnsureRoom(ctx, refSpec(ref), accts)
		if err != nil {
			return fmt.Errorf("failed to provision room %s: %w", ref, err)
		}
		for _, a := range accts {
			e := b.w().accounts[a.UserID()]
			b.w().joined[e.name] = append(b.w().joined[e.name], roomID)
		}
	}
	return nil
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

func (b *Bot) isConfiguredRef(ref string) bool {
	for _, key := range b.w().cfg.RoomKeys() {
		r := b.w().cfg.Rooms[key]
		if string(r.FullAlias(b.w().cfg.Matrix.ServerName)) == ref || (r.ID != "" && string(r.ID) == ref) {
			return true
		}
	}
	return false
}

func refSpec(ref string) matrixio.RoomSpec {
	if len(ref) > 0 && ref[0] == '!' {
		return matrixio.RoomSpec{ID: id.RoomID(ref)}
	}
	return matrixio.RoomSpec{Alias: id.RoomAlias(ref)}
}

// emitLifecycle fires agent:started, agent:stopped or bot:ready for every
// managed account.
func (b *Bot) emitLifecycle(ctx context.Context, ev hooks.Event[hooks.AgentLifecycleContext], stopReason string) {
	for _, e := range b.entities() {
		b.emitLifecycleFor(ctx, ev, e, stopReason)
	}
}

func (b *Bot) emitLifecycleFor(ctx context.Context, ev hooks.Event[hooks.AgentLifecycleContext], e entity, stopReason string) {
	reg := b.live.Load()
	if !reg.Has(ev.Name()) {
		return
	}
	c := &hooks.AgentLifecycleContext{
		Agent: e.name, EntityType: "agent", UserID: e.account.UserID(),
		JoinedRooms: b.w().joined[e.name], StopReason: stopReason,
	}
	if e.router {
		c.EntityType = "router"
	} else {
		c.Rooms = b.w().cfg.Agents[string(e.name)].Rooms
	}
	c.CorrelationID = fmt.Sprintf("%s:%s", ev.Name(), e.name)
	if err := hooks.Emit(ctx, reg, ev, c); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("event", ev.Name()).Msg("lifecycle hooks did not finish")
	}
}

// entities lists the managed accounts, router first, then agents by name.
func (b *Bot) entities() []entity {
	out := []entity{b.w().accounts[b.router.UserID()]}
	for _, name := range b.w().cfg.AgentNames() {
		out = append(out, b.w().accounts[b.w().agents[hooks.AgentName(name)].UserID()])
	}
	return out
}

// isManaged reports whether user is the router, an agent or a configured
// bot account: hookroom never treats their messages and joins as people's.
func (b *Bot) isManaged(user id.UserID) bool {
	if _, ok := b.w().accounts[user]; ok {
		return true
	}
	for _, u := range b.w().cfg.Matrix.BotAccounts {
		if u == user {
			return true
		}
	}
	return false
}
