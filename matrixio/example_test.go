package matrixio_test

import (
	"context"
	"database/sql"
	"log"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/matrixio"
)

// The wiring the bot does at start-up: store, manager, accounts, rooms, one
// sync loop per account, and a reply in a thread. (Compiled, not run: it
// needs a homeserver.)
func Example() {
	ctx := context.Background()
	raw, err := sql.Open("sqlite", "file:hookroom.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	db, err := dbutil.NewWithDB(raw, "sqlite")
	if err != nil {
		log.Fatal(err)
	}
	store := matrixio.NewStore(db)
	if err := store.Upgrade(ctx); err != nil {
		log.Fatal(err)
	}
	m, err := matrixio.NewManager(matrixio.Config{
		HomeserverURL: "http://127.0.0.1:8008",
		ServerName:    "example.org",
		Registration:  matrixio.Registration{SharedSecret: "from config.yaml"},
	}, store)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	router, err := m.EnsureAccount(ctx, matrixio.AccountSpec{Localpart: "router", DisplayName: "Router"})
	if err != nil {
		log.Fatal(err)
	}
	helper, err := m.EnsureAccount(ctx, matrixio.AccountSpec{Localpart: "helper", DisplayName: "Helper"})
	if err != nil {
		log.Fatal(err)
	}
	lobby, err := router.EnsureRoom(ctx, matrixio.RoomSpec{Alias: "#lobby:example.org", Name: "Lobby"},
		[]*matrixio.Account{router, helper})
	if err != nil {
		log.Fatal(err)
	}

	sink := matrixio.EventSinkFunc(func(ctx context.Context, acct id.UserID, b matrixio.SyncBatch) error {
		for _, room := range b.Rooms {
			for _, evt := range room.Timeline {
				_ = evt // persist to the inbox here, before returning nil
			}
		}
		return nil
	})
	go func() {
		if err := router.Run(ctx, sink); err != nil {
			log.Print(err)
		}
	}()

	var question id.EventID // an event taken from the inbox
	_, err = helper.SendText(ctx, lobby, "**Hello!** How can I help?", matrixio.SendOptions{
		TxnKey:     matrixio.TxnKey(question, "reply"),
		ThreadRoot: question,
	})
	if err != nil {
		log.Print(err)
	}
}
