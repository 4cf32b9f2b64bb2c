// Package lease keeps the run leases of one engine replica. A run lease is
// the record in the shared session store that says which replica runs a
// session's task; while a replica holds it, no other replica starts a task
// on that session, so two replicas never write one session's log at once.
//
// A lease lasts TTL from its last renewal, on the store's clock. The
// replica renews it every TTL/3 while the task runs; a replica that dies
// stops renewing, and once the lease has expired another replica may take
// the session. A renewal that finds the lease taken means this replica was
// cut off for longer than TTL and the session has moved on: the holder of
// the lost lease is told, so it stops its task.
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/penguin-agent/penguin/services/engine/store"
)

// DefaultTTL is how long a lease outlives its last renewal when Options
// leave TTL out.
const DefaultTTL = 30 * time.Second

// Store is the part of the session store that keeps leases.
type Store interface {
	AcquireLease(ctx context.Context, sessionID, owner, ownerAddr string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, sessionID, owner string) error
	LeaseHolder(ctx context.Context, sessionID string) (owner, ownerAddr string, expires time.Time, err error)
	StaleLeases(ctx context.Context, owner string) ([]string, error)
	LeaseCutOff(ctx context.Context, sessionID, owner string) (bool, error)
}

// Options configure a Keeper.
type Options struct {
	// Owner names this replica in leases; empty means the host name and
	// Address, or a random name without an Address.
	Owner string
	// Address is where other replicas reach this one.
	Address string
	// TTL is how long a lease lasts between renewals; zero means
	// DefaultTTL.
	TTL time.Duration
	// Logger receives failed renewals and lost leases; nil discards them.
	Logger *slog.Logger
}

// Keeper takes, renews and releases the leases of one replica.
type Keeper struct {
	store Store
	owner string
	addr  string
	ttl   time.Duration
	log   *slog.Logger
}

// New returns a Keeper for the replica that Options describe.
func New(st Store, o Options) *Keeper {
	if o.Owner == "" {
		o.Owner = defaultOwner(o.Address)
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Keeper{store: st, owner: o.Owner, addr: o.Address, ttl: o.TTL, log: o.Logger}
}

// defaultOwner names a replica. A replica restarted on the same host and
// address is the same owner: it takes its old leases back at once instead
// of waiting for them to expire after a crash. Two live replicas cannot
// share an address, so the name is unique while it matters.
func defaultOwner(addr string) string {
	if host, err := os.Hostname(); err == nil && addr != "" {
		return host + "/" + addr
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "engine-" + hex.EncodeToString(b)
}

// Owner returns the name this replica holds leases under.
func (k *Keeper) Owner() string { return k.owner }

// TTL returns how long a lease lasts between renewals.
func (k *Keeper) TTL() time.Duration { return k.ttl }

// HeldError says another replica holds a live lease on the session.
type HeldError struct {
	Session string
	// Owner and Address name the replica that holds the lease; both are
	// empty when the lease was released between the refusal and the
	// question who held it.
	Owner   string
	Address string
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("session %s is running on engine %s (%s)", e.Session, e.Owner, e.Address)
}

// Acquire takes the session's lease for this replica. A live lease of
// another replica is a *HeldError; the store's errors pass through. A
// store that reads what a task prepares from with the lease
// (store.LeaseReader) leaves it on the lease (TakeRead).
func (k *Keeper) Acquire(ctx context.Context, sessionID string) (*Lease, error) {
	var (
		ok   bool
		read *store.LeaseRead
		err  error
	)
	if lr, can := k.store.(store.LeaseReader); can {
		ok, read, err = lr.AcquireLeaseRead(ctx, sessionID, k.owner, k.addr, k.ttl)
	} else {
		ok, err = k.store.AcquireLease(ctx, sessionID, k.owner, k.addr, k.ttl)
	}
	if err != nil {
		return nil, err
	}
	if !ok {
		held := &HeldError{Session: sessionID}
		held.Owner, held.Address, _, _ = k.store.LeaseHolder(ctx, sessionID)
		return nil, held
	}
	return &Lease{k: k, session: sessionID, read: read}, nil
}

// Peeker is a store that reads a session without taking its lease
// (store.Store's PeekLease).
type Peeker interface {
	PeekLease(ctx context.Context, sessionID string, agent store.AgentRef) (*store.LeaseRead, error)
}

// Claim readies the session's lease to be taken by the task's first
// write (store.SessionWrite.Claim) instead of in a transaction of its
// own: it reads the session (PeekLease) and, when no lease is on it,
// returns a Lease not taken yet, with what it read (TakeRead), and the
// claim for that write, which the store refuses (store.ErrLeaseTaken)
// when another replica took the lease, or took it and wrote the log,
// since the read. The claimer must not write the session before, nor act
// on it as its runner: until the claim is taken (Taken) it has prepared
// only. agent, when not zero, is the agent the claimer expects the
// session to run, whose version the read takes too. When a lease is on
// the session (a run holds it, or one was cut off and is resumed by
// whoever takes it), or the store cannot read without it, Claim takes
// the lease as Acquire does and the claim is nil.
func (k *Keeper) Claim(ctx context.Context, sessionID string, agent store.AgentRef) (*Lease, *store.LeaseClaim, error) {
	p, can := k.store.(Peeker)
	if !can {
		l, err := k.Acquire(ctx, sessionID)
		return l, nil, err
	}
	r, err := p.PeekLease(ctx, sessionID, agent)
	if err != nil {
		return nil, nil, err
	}
	if r.Leased {
		l, err := k.Acquire(ctx, sessionID)
		return l, nil, err
	}
	l := &Lease{k: k, session: sessionID, read: r, pending: true}
	return l, &store.LeaseClaim{Owner: k.owner, OwnerAddr: k.addr, TTL: k.ttl, LastSequence: r.Row.LastSequence}, nil
}

// Refused returns the error for a claim the store refused: a *HeldError
// naming the replica that holds the lease now, empty when it let the
// lease go since.
func (k *Keeper) Refused(ctx context.Context, sessionID string) *HeldError {
	held := &HeldError{Session: sessionID}
	held.Owner, held.Address, _, _ = k.store.LeaseHolder(ctx, sessionID)
	return held
}

// Holder returns the replica that holds a live lease on the session, and
// whether one does.
func (k *Keeper) Holder(ctx context.Context, sessionID string) (owner, addr string, held bool, err error) {
	owner, addr, _, err = k.store.LeaseHolder(ctx, sessionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", "", false, nil
	case err != nil:
		return "", "", false, err
	}
	return owner, addr, true, nil
}

// Stale returns the sessions whose run was cut off and is this replica's
// to take: leases that expired, and leases held under this replica's own
// name, which a replica restarted on the same host and address left
// behind. The caller skips the sessions it is running itself.
func (k *Keeper) Stale(ctx context.Context) ([]string, error) {
	return k.store.StaleLeases(ctx, k.owner)
}

// CutOff reports whether the session's run was cut off and is this
// replica's to take, as Stale would list it.
func (k *Keeper) CutOff(ctx context.Context, sessionID string) (bool, error) {
	return k.store.LeaseCutOff(ctx, sessionID, k.owner)
}

// Lease is one held lease.
type Lease struct {
	k       *Keeper
	session string
	// read is what the store read with the lease, until TakeRead; nil
	// when the store does not read with the lease.
	read *store.LeaseRead

	mu   sync.Mutex
	stop context.CancelFunc
	done chan struct{}
	// pending says the lease was claimed (Keeper.Claim) and no write has
	// taken it yet: there is nothing to renew, release or hand over.
	pending bool
}

// Taken records that the write that claimed the lease took it.
func (l *Lease) Taken() {
	l.mu.Lock()
	l.pending = false
	l.mu.Unlock()
}

// held reports whether the lease is this replica's in the store: taken,
// not only claimed.
func (l *Lease) held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.pending
}

// TakeRead returns what the store read with the lease (the session's
// row, and its log when short), or before claiming it, once: nil after
// the first call, or when the store did not read with the lease. No other
// replica starts a task on the session from then on (a claimed lease: or
// the claim is refused), so it is what reads right after the lease would
// have returned, unless this replica wrote the session since.
func (l *Lease) TakeRead() *store.LeaseRead {
	r := l.read
	l.read = nil
	return r
}

// Keep renews the lease every TTL/3 until Release, or until ctx ends. When
// a renewal finds the lease held by another replica, lost is called once
// with that replica's name and the renewals stop. A renewal that fails
// (the store is unreachable) is logged and tried again at the next tick:
// the lease stays this replica's until it expires.
func (l *Lease) Keep(ctx context.Context, lost func(owner string)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	l.mu.Lock()
	l.stop, l.done = cancel, done
	l.mu.Unlock()
	k := l.k
	go func() {
		defer close(done)
		tick := time.NewTicker(k.ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			ok, err := k.store.AcquireLease(ctx, l.session, k.owner, k.addr, k.ttl)
			switch {
			case err != nil && ctx.Err() == nil:
				k.log.Warn("could not renew a run lease", "session", l.session, "error", err)
			case err == nil && !ok:
				owner, addr, _, _ := k.store.LeaseHolder(ctx, l.session)
				k.log.Error("the run lease was taken over by another engine replica; stopping the task here",
					"session", l.session, "owner", owner, "address", addr)
				lost(owner)
				return
			}
		}
	}()
}

// Handover stops the renewals, waits for a renewal in flight, and lets
// the lease expire at once instead of giving it up (a lease claimed and
// never taken has nothing to hand over): the run is still in
// progress, and the replica that takes the expired lease (another one, or
// this one restarted) resumes it. The lease row, not its expiry, is what
// says a run was cut off, so it must stay.
func (l *Lease) Handover(ctx context.Context) error {
	l.stopRenewals()
	if !l.held() {
		return nil
	}
	_, err := l.k.store.AcquireLease(ctx, l.session, l.k.owner, l.k.addr, handoverTTL)
	return err
}

// handoverTTL is the shortest lease the store takes: a handed-over lease
// is expired by the time another replica looks.
const handoverTTL = time.Millisecond

// stopRenewals stops Keep's renewals and waits for one in flight.
func (l *Lease) stopRenewals() {
	l.mu.Lock()
	stop, done := l.stop, l.done
	l.stop, l.done = nil, nil
	l.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// ReleaseWith stops the renewals, waits for a renewal in flight, and has
// release give the lease up, handing it the owner to give it up for: for
// a caller that releases the lease in a transaction with other writes
// (store.SessionWrite). A renewal after the release would take the lease
// again, so none may be in flight by then.
func (l *Lease) ReleaseWith(release func(owner string) error) error {
	l.stopRenewals()
	return release(l.k.owner)
}

// Release stops the renewals, waits for a renewal in flight, and gives
// the lease up; a lease claimed and never taken is left alone. Releasing
// twice is harmless.
func (l *Lease) Release(ctx context.Context) error {
	l.stopRenewals()
	if !l.held() {
		return nil
	}
	return l.k.store.ReleaseLease(ctx, l.session, l.k.owner)
}
