package memory

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/database"
)

// upgradeFiles holds the package's numbered migrations, versioned in their
// own memory_version table (database.Tables).
//
//go:embed upgrades/*.sql
var upgradeFiles embed.FS

// Who is the conversation a memory operation is for: the agent answering,
// the person it acts for (the turn's requester) and the room. It is the
// only way to name whose memories an operation sees: there is no call that
// takes another person's id.
type Who struct {
	Agent  hooks.AgentName
	Person id.UserID
	Room   id.RoomID
	// Encrypted says the room is end-to-end encrypted. What is said there
	// never leaves the database: such memories get no embedding, and a
	// query from there is not sent to the embeddings endpoint.
	Encrypted bool
}

// Memory is one remembered text.
type Memory struct {
	// ID is short, stable and shown to people ("mab3k9xq2"): !memory forget
	// takes it.
	ID    string
	Agent hooks.AgentName
	Scope Scope
	// Person is whose memory it is (ScopePerson), "" otherwise.
	Person id.UserID
	// Room is where it was told; for ScopeRoom, the room it belongs to.
	Room id.RoomID
	// Author is the person who told it; only they may forget a room or
	// agent memory.
	Author id.UserID
	Text   string
	// Source is where it came from: an event id, "tool" or "extracted".
	Source    string
	Encrypted bool
	CreatedAt time.Time
	// Score is Recall's fused rank score (higher is better, comparable
	// only within one Recall); 0 from List.
	Score float64
}

// Sources of memories besides event ids.
const (
	SourceTool      = "tool"
	SourceExtracted = "extracted"
)

// Errors of the store.
var (
	// ErrNotFound: no memory with that id that the person may forget.
	ErrNotFound = errors.New("memory not found")
	// ErrDisabled: the agent has no memory, or not in that scope.
	ErrDisabled = errors.New("memory is not enabled")
	// ErrEmpty: the text to remember is empty.
	ErrEmpty = errors.New("nothing to remember: the text is empty")
)

// Store keeps memories in hookroom's database (SQLite or PostgreSQL) and
// enforces who may see and forget them. It is safe for concurrent use.
type Store struct {
	db       *dbutil.Database
	cfg      Config
	embedder Embedder
	model    string // tags stored vectors
	agents   atomic.Pointer[map[hooks.AgentName]Options]
	now      func() time.Time
}

// New returns a Store on db with the shared settings c and, when embedder is
// not nil, hybrid ranking (see Recall). Call Upgrade before any other
// method, and Configure to give agents memory.
func New(db *dbutil.Database, c Config, embedder Embedder) *Store {
	s := &Store{db: database.Tables(db, "memory", upgradeFiles), cfg: c, embedder: embedder, now: time.Now}
	if embedder != nil {
		s.model = c.Embeddings.Model
		if m, ok := embedder.(interface{ Model() string }); ok && m.Model() != "" {
			s.model = m.Model()
		}
		if s.model == "" {
			s.model = "embedder"
		}
	}
	empty := map[hooks.AgentName]Options{}
	s.agents.Store(&empty)
	return s
}

// Upgrade creates or migrates the memory tables. Call it once at start-up.
func (s *Store) Upgrade(ctx context.Context) error { return database.Upgrade(ctx, s.db) }

// Configure sets every agent's options (their memory: sections), replacing
// the previous ones; an agent left out has memory off. Call it at start-up
// and after each config reload. Memories stay stored when an agent's memory
// is turned off: List, Forget and ForgetAll keep working for people.
func (s *Store) Configure(agents map[hooks.AgentName]Options) {
	m := maps.Clone(agents)
	if m == nil {
		m = map[hooks.AgentName]Options{}
	}
	s.agents.Store(&m)
}

// Options returns the agent's options (zero: off).
func (s *Store) Options(agent hooks.AgentName) Options { return (*s.agents.Load())[agent] }

// Remember stores text in scope for who, from source (an event id,
// SourceTool or SourceExtracted), and returns it. The text is cut to
// max_text_length characters and its whitespace collapsed; the same text in
// the same scope is one memory: remembering it again returns the stored one
// with created false. Beyond the agent's max_per_scope the scope's oldest
// memories are dropped. A person memory is who.Person's, a room memory
// who.Room's; who.Person is the author either way. ErrDisabled when the
// agent has no memory in scope.
func (s *Store) Remember(ctx context.Context, who Who, scope Scope, text, source string) (m Memory, created bool, err error) {
	opts := s.Options(who.Agent)
	if !opts.Enabled {
		return Memory{}, false, fmt.Errorf("%w for agent %s", ErrDisabled, who.Agent)
	}
	if !scope.Valid() {
		return Memory{}, false, fmt.Errorf("failed to remember: unknown scope %q (want person, room or agent)", scope)
	}
	if !opts.Allows(scope) {
		return Memory{}, false, fmt.Errorf("%w in scope %s for agent %s", ErrDisabled, scope, who.Agent)
	}
	owner, err := ownerOf(who, scope)
	if err != nil {
		return Memory{}, false, err
	}
	text = Normalize(text, s.cfg.maxTextLength())
	if text == "" {
		return Memory{}, false, ErrEmpty
	}
	sum := sha256.Sum256([]byte(text))
	hash := hex.EncodeToString(sum[:])
	if old, err := s.byHash(ctx, who.Agent, scope, owner, hash); err == nil {
		return old, false, nil
	} else if !errors.Is(err, ErrNotFound) {
		return Memory{}, false, err
	}
	var vec []byte
	if s.embedder != nil && !who.Encrypted {
		vs, err := s.embedder.Embed(ctx, []string{text})
		if err != nil || len(vs) != 1 {
			// The memory is stored all the same; Backfill embeds it later.
			zerolog.Ctx(ctx).Warn().Err(err).Msg("memory: no embedding for a new memory, stored without one")
		} else {
			vec = encodeVector(vs[0])
		}
	}
	m = Memory{
		ID: newID(), Agent: who.Agent, Scope: scope, Room: who.Room, Author: who.Person, Text: text,
		Source: source, Encrypted: who.Encrypted, CreatedAt: s.now(),
	}
	if scope == ScopePerson {
		m.Person = who.Person
	}
	model := ""
	if vec != nil {
		model = s.model
	}
	err = s.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		res, err := s.db.Exec(ctx, `
			INSERT INTO memory (id, agent, scope, owner, author, room, text, text_hash, scope_key, source,
				encrypted, created_at, embedding, embedding_model)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
			ON CONFLICT (agent, scope, owner, text_hash) DO NOTHING`,
			m.ID, string(who.Agent), string(scope), owner, string(who.Person), string(who.Room), text, hash,
			scopeKey(who.Agent, scope, owner), source, who.Encrypted, m.CreatedAt.UnixMilli(), vec, model)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // a concurrent Remember stored it first
		}
		created = true
		_, err = s.db.Exec(ctx, `
			DELETE FROM memory WHERE agent=$1 AND scope=$2 AND owner=$3 AND seq <= (
				SELECT seq FROM memory WHERE agent=$1 AND scope=$2 AND owner=$3 ORDER BY seq DESC LIMIT 1 OFFSET $4)`,
			string(who.Agent), string(scope), owner, opts.maxPerScope())
		return err
	})
	if err != nil {
		return Memory{}, false, fmt.Errorf("failed to remember for agent %s: %w", who.Agent, err)
	}
	if !created {
		old, err := s.byHash(ctx, who.Agent, scope, owner, hash)
		return old, false, err
	}
	return m, true, nil
}

// ownerOf returns the owner column of a memory in scope for who.
func ownerOf(who Who, scope Scope) (string, error) {
	switch scope {
	case ScopePerson:
		if who.Person == "" {
			return "", errors.New("failed to remember: a person memory needs the person")
		}
		return string(who.Person), nil
	case ScopeRoom:
		if who.Room == "" {
			return "", errors.New("failed to remember: a room memory needs the room")
		}
		return string(who.Room), nil
	}
	return "", nil
}

// Normalize is the text Remember stores for text: valid UTF-8, runs of
// white space (newlines included) as one space, trimmed, at most max
// characters (cut at a character boundary; max <= 0: no cap).
func Normalize(text string, max int) string {
	text = strings.Join(strings.FieldsFunc(strings.ToValidUTF8(text, "\uFFFD"), unicode.IsSpace), " ")
	if max > 0 && utf8.RuneCountInString(text) > max {
		n := 0
		for i := range text {
			if n == max {
				text = strings.TrimSpace(text[:i])
				break
			}
			n++
		}
	}
	return text
}

// idAlphabet is Crockford-like lowercase base32 without l, o, 0 and 1, so
// ids read and type well.
const idAlphabet = "abcdefghijkmnpqrstuvwxyz23456789"

// newID returns "m" and 8 random characters (40 bits).
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	out := []byte{'m'}
	for _, c := range b {
		out = append(out, idAlphabet[c%32])
	}
	return string(out)
}

// scopeKey is the full-text token naming (agent, scope, owner).
func scopeKey(agent hooks.AgentName, scope Scope, owner string) string {
	sum := sha256.Sum256([]byte(string(agent) + "\x00" + string(scope) + "\x00" + owner))
	return "k" + hex.EncodeToString(sum[:10])
}

const memoryColumns = `m.id, m.agent, m.scope, m.owner, m.author, m.room, m.text, m.source, m.encrypted, m.created_at`

func scanMemory(row dbutil.Scannable, extra ...any) (Memory, error) {
	var m Memory
	var agent, scope, owner, author, room string
	var created int64
	err := row.Scan(append([]any{&m.ID, &agent, &scope, &owner, &author, &room, &m.Text, &m.Source, &m.Encrypted, &created}, extra...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return m, ErrNotFound
	}
	if err != nil {
		return m, err
	}
	m.Agent, m.Scope, m.Author, m.Room = hooks.AgentName(agent), Scope(scope), id.UserID(author), id.RoomID(room)
	switch m.Scope {
	case ScopePerson:
		m.Person = id.UserID(owner)
	case ScopeRoom:
		m.Room = id.RoomID(owner)
	}
	m.CreatedAt = time.UnixMilli(created)
	return m, nil
}

func (s *Store) byHash(ctx context.Context, agent hooks.AgentName, scope Scope, owner, hash string) (Memory, error) {
	m, err := scanMemory(s.db.QueryRow(ctx, `SELECT `+memoryColumns+` FROM memory m
		WHERE m.agent=$1 AND m.scope=$2 AND m.owner=$3 AND m.text_hash=$4`, string(agent), string(scope), owner, hash))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return m, fmt.Errorf("failed to read memories: %w", err)
	}
	return m, err
}

// visible is the privacy rule of the store as SQL: the memories who may
// see, in scopes (nil: all three). Its parameters are numbered from first,
// their values in args. A person memory is seen only by its person, a room
// memory only in its room, an agent memory by everyone the agent answers.
// It returns "" when who can see nothing.
func visible(who Who, scopes []Scope, first int) (clause string, args []any) {
	if who.Agent == "" {
		return "", nil
	}
	allow := func(s Scope) bool { return scopes == nil || slices.Contains(scopes, s) }
	param := func(v string) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", first+len(args)-1)
	}
	agent := param(string(who.Agent))
	var parts []string
	if allow(ScopePerson) && who.Person != "" {
		parts = append(parts, "(m.scope='person' AND m.owner="+param(string(who.Person))+")")
	}
	if allow(ScopeRoom) && who.Room != "" {
		parts = append(parts, "(m.scope='room' AND m.owner="+param(string(who.Room))+")")
	}
	if allow(ScopeAgent) {
		parts = append(parts, "(m.scope='agent' AND m.owner='')")
	}
	if len(parts) == 0 {
		return "", nil
	}
	// owners repeats the owners of the parts as one IN list on the index
	// (agent, owner, …), so the database reads only these scopes' rows; the
	// parts stay the rule.
	owners := []string{"''"}
	for i := 1; i < len(args); i++ {
		owners = append(owners, fmt.Sprintf("$%d", first+i))
	}
	return "m.agent=" + agent + " AND m.owner IN (" + strings.Join(owners, ", ") + ") AND (" + strings.Join(parts, " OR ") + ")", args
}

// forgettable is the rule of who may forget what, as SQL (args as for
// visible): a person forgets their own person memories, and the room and
// agent memories they told (a room memory only from within its room).
func forgettable(who Who, first int) (string, []any) {
	return fmt.Sprintf(`m.agent=$%d AND $%d <> '' AND (
		(m.scope='person' AND m.owner=$%[2]d) OR
		(m.scope='room' AND m.owner=$%d AND m.author=$%[2]d) OR
		(m.scope='agent' AND m.owner='' AND m.author=$%[2]d))`, first, first+1, first+2),
		[]any{string(who.Agent), string(who.Person), string(who.Room)}
}

// List returns every memory who can see, whatever scopes the agent has
// enabled today (so that people can review and forget what is stored): the
// person's own memories with the agent, the room's, and the agent's; oldest
// first. It is what !memory shows.
func (s *Store) List(ctx context.Context, who Who) ([]Memory, error) {
	clause, args := visible(who, nil, 1)
	if clause == "" {
		return nil, nil
	}
	return s.query(ctx, `SELECT `+memoryColumns+` FROM memory m WHERE `+clause+` ORDER BY m.seq`, args...)
}

// Forget deletes memory memoryID, if who may forget it: the person's own
// person memory with the agent, or a room (in its room) or agent memory they
// told. The row goes, and with it its full-text index entry and its vector.
// ErrNotFound otherwise, whether the memory does not exist or is not
// theirs to forget.
func (s *Store) Forget(ctx context.Context, who Who, memoryID string) error {
	clause, args := forgettable(who, 2)
	res, err := s.db.Exec(ctx, `DELETE FROM memory WHERE seq IN (SELECT m.seq FROM memory m WHERE m.id=$1 AND `+clause+`)`,
		append([]any{strings.TrimSpace(memoryID)}, args...)...)
	if err != nil {
		return fmt.Errorf("failed to forget memory %s: %w", memoryID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("failed to forget memory %s: %w", memoryID, err)
	} else if n == 0 {
		return ErrNotFound
	}
	return nil
}

// ForgetAll deletes every memory who may forget (see Forget) and returns how
// many: all the person's memories with the agent, in every room, and the room
// (this room's) and agent memories they told.
func (s *Store) ForgetAll(ctx context.Context, who Who) (int, error) {
	clause, args := forgettable(who, 1)
	res, err := s.db.Exec(ctx, `DELETE FROM memory WHERE seq IN (SELECT m.seq FROM memory m WHERE `+clause+`)`, args...)
	if err != nil {
		return 0, fmt.Errorf("failed to forget memories: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("failed to forget memories: %w", err)
	}
	return int(n), nil
}

// Backfill embeds up to batch memories that have no vector of the current
// embedder (stored while it was down, or by another model) and returns how
// many it embedded; 0 when there is no embedder or nothing left. Memories of
// encrypted rooms are never embedded. The bot calls it at start-up and now
// and then, until it returns 0.
func (s *Store) Backfill(ctx context.Context, batch int) (int, error) {
	if s.embedder == nil {
		return 0, nil
	}
	if batch <= 0 {
		batch = 64
	}
	rows, err := s.db.Query(ctx, `SELECT m.seq, m.text FROM memory m
		WHERE m.encrypted=$1 AND (m.embedding IS NULL OR m.embedding_model <> $2) ORDER BY m.seq LIMIT $3`, false, s.model, batch)
	type todo struct {
		seq  int64
		text string
	}
	list, err := dbutil.NewRowIterWithError(rows, func(r dbutil.Scannable) (t todo, err error) {
		return t, r.Scan(&t.seq, &t.text)
	}, err).AsList()
	if err != nil {
		return 0, fmt.Errorf("failed to read memories to embed: %w", err)
	}
	if len(list) == 0 {
		return 0, nil
	}
	texts := make([]string, len(list))
	for i, t := range list {
		texts[i] = t.text
	}
	vecs, err := s.embedder.Embed(ctx, texts)
	if err != nil {
		return 0, err
	}
	if len(vecs) != len(list) {
		return 0, fmt.Errorf("failed to embed memories: asked for %d vectors, got %d", len(list), len(vecs))
	}
	err = s.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		for i, t := range list {
			if _, err := s.db.Exec(ctx, `UPDATE memory SET embedding=$2, embedding_model=$3 WHERE seq=$1`,
				t.seq, encodeVector(vecs[i]), s.model); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("failed to store memory vectors: %w", err)
	}
	return len(list), nil
}

func (s *Store) query(ctx context.Context, q string, args ...any) ([]Memory, error) {
	rows, err := s.db.Query(ctx, q, args...)
	list, err := dbutil.NewRowIterWithError(rows, func(r dbutil.Scannable) (Memory, error) { return scanMemory(r) }, err).AsList()
	if err != nil {
		return nil, fmt.Errorf("failed to read memories: %w", err)
	}
	return list, nil
}
