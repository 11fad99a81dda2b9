package boltstore

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/agentproto/handoff/replay"
	"github.com/agentproto/handoff/replay/storetest"
)

func openTemp(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "replay.db"), opts)
	require.NoError(t, err)
	return s
}

func reopen(t *testing.T, closed replay.Store, now func() time.Time) replay.Store {
	s, err := Open(closed.(*Store).Path(), Options{Now: now})
	require.NoError(t, err)
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) replay.Store {
		return openTemp(t, Options{Now: now})
	}, storetest.Options{Reopen: reopen})
}

func TestStoreBoundedWithReclaimer(t *testing.T) {
	// A reclaimer that runs all the time, racing with every operation.
	const max = 64
	storetest.Run(t, func(t *testing.T, now func() time.Time) replay.Store {
		return openTemp(t, Options{Now: now, MaxEntries: max, MaxPerIssuer: -1, ReclaimEvery: time.Millisecond})
	}, storetest.Options{MaxEntries: max})
}

func TestStoreIssuerShare(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) replay.Store {
		return openTemp(t, Options{Now: now, MaxEntries: 1000, MaxPerIssuer: 40, ReclaimEvery: -1})
	}, storetest.Options{MaxPerIssuer: 40, Reopen: reopen})
}

func digest(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

// count returns the stored record count and the number of keys in the
// records and expiry buckets.
func count(t *testing.T, s *Store) (meta uint64, records, index int) {
	t.Helper()
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		recs, idx, m := buckets(tx)
		records, index = recs.Stats().KeyN, idx.Stats().KeyN
		var err error
		meta, err = getCount(m)
		return err
	}))
	return meta, records, index
}

func TestReclaim(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(2e9, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := openTemp(t, Options{Now: clock, ReclaimEvery: -1})
	defer s.Close()
	ctx := context.Background()
	const n = 1000
	for i := range n {
		exp := now.Add(time.Duration(i%10+1) * time.Second)
		if i%10 == 9 {
			exp = time.Time{}
		}
		_, ok, err := s.Remember(ctx, replay.Key{Iss: "iss", Hop: fmt.Sprint(i)}, replay.Record{Digest: digest(fmt.Sprint(i)), Expires: exp})
		require.NoError(t, err)
		require.True(t, ok)
	}
	// Moving a record's expiry moves its index entry.
	require.NoError(t, s.Update(ctx, replay.Key{Iss: "iss", Hop: "0"}, replay.Record{Digest: digest("0"), Expires: now.Add(time.Hour)}))
	meta, recs, idx := count(t, s)
	assert.Equal(t, uint64(n), meta)
	assert.Equal(t, n, recs)
	assert.Equal(t, n-n/10, idx)

	mu.Lock()
	now = now.Add(5 * time.Second)
	mu.Unlock()
	freed, err := s.Reclaim(ctx)
	require.NoError(t, err)
	assert.Equal(t, 5*n/10-1, freed)
	meta, recs, idx = count(t, s)
	assert.Equal(t, uint64(n-freed), meta)
	assert.Equal(t, n-freed, recs)
	assert.Equal(t, n-n/10-freed, idx)

	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	freed, err = s.Reclaim(ctx)
	require.NoError(t, err)
	assert.Equal(t, 4*n/10, freed)
	meta, recs, idx = count(t, s)
	assert.Equal(t, uint64(n/10+1), meta, "records with no expiry and the moved one remain")
	assert.Equal(t, n/10+1, recs)
	assert.Equal(t, 1, idx)
}

func TestBackgroundReclaimer(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(2e9, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := openTemp(t, Options{Now: clock, ReclaimEvery: 5 * time.Millisecond})
	defer s.Close()
	for i := range 2*reclaimBatch + 10 {
		_, _, err := s.Remember(context.Background(), replay.Key{Iss: "iss", Hop: fmt.Sprint(i)}, replay.Record{Digest: digest(fmt.Sprint(i)), Expires: now.Add(time.Second)})
		require.NoError(t, err)
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	require.Eventually(t, func() bool {
		meta, recs, idx := count(t, s)
		return meta == 0 && recs == 0 && idx == 0
	}, 10*time.Second, 10*time.Millisecond)
}

func TestMalformedValueIsAnError(t *testing.T) {
	s := openTemp(t, Options{ReclaimEvery: -1})
	defer s.Close()
	ctx := context.Background()
	k := replay.Key{Iss: "iss", Hop: "hop"}
	for _, bad := range [][]byte{{}, {2}, append([]byte{1}, make([]byte, 40)...), append(make([]byte, 46), 0xff)} {
		require.NoError(t, s.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketRecords).Put(recordKey(k), bad)
		}))
		_, ok, err := s.Get(ctx, k)
		assert.Error(t, err, "Get of %x", bad)
		assert.False(t, ok)
		_, inserted, err := s.Remember(ctx, k, replay.Record{Digest: digest("x")})
		assert.Error(t, err, "Remember over %x", bad)
		assert.False(t, inserted)
		assert.Error(t, s.Update(ctx, k, replay.Record{Digest: digest("x")}))
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "replay.db")

	// Not a bbolt file.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "junk"), []byte(strings.Repeat("junk", 2048)), 0o600))
	_, err := Open(filepath.Join(dir, "junk"), Options{})
	assert.Error(t, err)

	// Another layout version.
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		return b.Put(metaVersion, []byte{9})
	}))
	require.NoError(t, db.Close())
	_, err = Open(path, Options{})
	assert.ErrorContains(t, err, "version")

	// A file held by another store.
	path2 := filepath.Join(dir, "held.db")
	s, err := Open(path2, Options{})
	require.NoError(t, err)
	defer s.Close()
	_, err = Open(path2, Options{})
	assert.Error(t, err, "a second Open of a held file")
}

// A file another open store holds is refused with a message that says so,
// for a Store and an OfferStore alike, and opens once the other is closed.
func TestOpen_LockedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "held.db")
	s, err := Open(path, Options{})
	require.NoError(t, err)
	want := "boltstore: open " + path + ": replay: store unavailable: the file is locked by another open store, " +
		"in this process or another (waited 1s for its lock; close that store first)"
	_, err = Open(path, Options{})
	require.ErrorIs(t, err, ErrLocked)
	require.ErrorIs(t, err, replay.ErrUnavailable)
	require.EqualError(t, err, want)
	_, err = OpenOffers(path, OfferOptions{})
	require.ErrorIs(t, err, ErrLocked)
	require.EqualError(t, err, want)

	require.NoError(t, s.Close())
	s, err = Open(path, Options{})
	require.NoError(t, err, "the lock goes with the store that held it")
	require.NoError(t, s.Close())
}

func TestClosed(t *testing.T) {
	s := openTemp(t, Options{})
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "a second Close")
	_, _, err := s.Remember(context.Background(), replay.Key{Iss: "i", Hop: "h"}, replay.Record{Digest: digest("x")})
	assert.ErrorIs(t, err, replay.ErrUnavailable)
	_, _, err = s.Get(context.Background(), replay.Key{Iss: "i", Hop: "h"})
	assert.ErrorIs(t, err, replay.ErrUnavailable)
}

const crashEnv = "HANDOFF_BOLTSTORE_CRASH_FILE"

// TestCrashChild is the write load of TestCrash, run in a child process:
// it remembers hops as fast as it can and prints each one the store has
// acknowledged, until it is killed.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("run by TestCrash in a child process")
	}
	s, err := Open(path, Options{ReclaimEvery: time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var out sync.Mutex
	ack := func(line string) {
		out.Lock()
		defer out.Unlock()
		// os.Stdout is unbuffered: the line is written before the next
		// operation starts.
		if _, err := os.Stdout.WriteString(line + "\n"); err != nil {
			os.Exit(3)
		}
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				hop := fmt.Sprintf("g%d-%d", g, i)
				k := replay.Key{Iss: "https://delegator.example", Hop: hop}
				rec := replay.Record{Digest: digest(hop), Expires: time.Now().Add(time.Hour)}
				if i%7 == 0 {
					rec.Expires = time.Now().Add(-time.Hour) // reclaimed as the load runs
				}
				if _, inserted, err := s.Remember(ctx, k, rec); err != nil || !inserted {
					fmt.Fprintln(os.Stderr, hop, inserted, err)
					os.Exit(4)
				}
				if i%7 == 0 {
					continue
				}
				ack("remembered " + hop)
				if i%5 == 0 {
					rec.State, rec.Status = "completed", []byte("status "+hop)
					if err := s.Update(ctx, k, rec); err != nil {
						fmt.Fprintln(os.Stderr, hop, err)
						os.Exit(5)
					}
					ack("updated " + hop)
				}
			}
		}()
	}
	wg.Wait()
}

// TestCrash kills a process writing to the store and checks that the file
// opens cleanly afterwards and holds every record the store acknowledged.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	const minAcked = 200
	path := filepath.Join(t.TempDir(), "replay.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()

	remembered := map[string]bool{}
	updated := map[string]bool{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		verb, hop, ok := strings.Cut(sc.Text(), " ")
		switch {
		case ok && verb == "remembered":
			remembered[hop] = true
		case ok && verb == "updated":
			updated[hop] = true
		default:
			continue // test framework output
		}
		if len(remembered) == 1 && verb == "remembered" {
			// The child process holds the file: this one cannot open it.
			_, err := Open(path, Options{})
			require.ErrorIs(t, err, ErrLocked)
			require.ErrorContains(t, err, "the file is locked by another open store, in this process or another")
		}
		if !killed && len(remembered) >= minAcked+len(remembered)%97 {
			// Kill mid-load, at a point that varies with the timing.
			require.NoError(t, cmd.Process.Kill())
			killed = true
		}
	}
	require.NoError(t, sc.Err())
	err = cmd.Wait()
	require.True(t, killed, "child ended before being killed: %v\n%s", err, stderr.String())
	require.GreaterOrEqual(t, len(remembered), minAcked)
	t.Logf("child killed after %d acknowledged Remember and %d Update calls", len(remembered), len(updated))

	// The file is consistent.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt check: %v", err)
		}
		return nil
	}))
	require.NoError(t, db.Close())

	s, err := Open(path, Options{ReclaimEvery: -1})
	require.NoError(t, err, "reopening after the crash")
	defer s.Close()
	ctx := context.Background()
	found, foundUpdated := 0, 0
	for hop := range remembered {
		rec, ok, err := s.Get(ctx, replay.Key{Iss: "https://delegator.example", Hop: hop})
		require.NoError(t, err)
		if !ok {
			t.Errorf("acknowledged hop %s is missing", hop)
			continue
		}
		found++
		assert.Equal(t, digest(hop), rec.Digest)
		if updated[hop] {
			if assert.Equal(t, "completed", rec.State, "hop %s", hop) {
				foundUpdated++
			}
			assert.Equal(t, "status "+hop, string(rec.Status))
		}
	}
	assert.Equal(t, len(remembered), found, "acknowledged records found")
	assert.Equal(t, len(updated), foundUpdated, "acknowledged updates found")

	// The record count matches the records, so bounds keep holding.
	meta, recs, idx := count(t, s)
	assert.Equal(t, uint64(recs), meta)
	assert.LessOrEqual(t, idx, recs)
}

func TestOfferStore(t *testing.T) {
	storetest.RunOffers(t, func(t *testing.T, now func() time.Time) replay.OfferStore {
		s, err := OpenOffers(filepath.Join(t.TempDir(), "offers.db"), OfferOptions{Now: now, MaxRecords: 8})
		require.NoError(t, err)
		return s
	}, storetest.OfferOptions{MaxRecords: 8, Reopen: func(t *testing.T, closed replay.OfferStore, now func() time.Time) replay.OfferStore {
		s, err := OpenOffers(closed.(*OfferStore).Path(), OfferOptions{Now: now, MaxRecords: 8})
		require.NoError(t, err)
		return s
	}})
}

// The offers kept beside a Store's records, in one file.
func TestOfferStoreInStoreFile(t *testing.T) {
	storetest.RunOffers(t, func(t *testing.T, now func() time.Time) replay.OfferStore {
		st := openTemp(t, Options{Now: now, MaxOffers: 8})
		t.Cleanup(func() { st.Close() })
		o, err := st.Offers()
		require.NoError(t, err)
		return o
	}, storetest.OfferOptions{MaxRecords: 8})
	// Both kinds of record live together and survive a reopen.
	ctx := context.Background()
	st := openTemp(t, Options{})
	o, err := st.Offers()
	require.NoError(t, err)
	k := replay.Key{Iss: "iss", Hop: "hop"}
	rec := replay.Record{Digest: digest("received")}
	_, inserted, err := st.Remember(ctx, k, rec)
	require.NoError(t, err)
	require.True(t, inserted)
	made, err := o.Create(ctx, replay.OfferRecord{Hop: "hop", To: "to", Digest: digest("offered"), Open: true, Work: "w"})
	require.NoError(t, err)
	require.NoError(t, o.Close())
	require.NoError(t, st.Close())
	st2, err := Open(st.Path(), Options{})
	require.NoError(t, err)
	defer st2.Close()
	o2, err := st2.Offers()
	require.NoError(t, err)
	got, ok, err := st2.Get(ctx, k)
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, rec.Equal(got))
	gotOffer, ok, err := o2.Get(ctx, "hop")
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, made.Equal(gotOffer))
}

func TestOfferReclaim(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(2e9, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s, err := OpenOffers(filepath.Join(t.TempDir(), "offers.db"), OfferOptions{Now: clock})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	for i := range 10 {
		r := replay.OfferRecord{Hop: fmt.Sprint(i), To: "t", Digest: digest(fmt.Sprint(i))}
		if i%2 == 0 {
			r.Expires = now.Add(time.Second)
		}
		_, err := s.Create(ctx, r)
		require.NoError(t, err)
	}
	n, err := s.Reclaim(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	n, err = s.Reclaim(ctx)
	require.NoError(t, err)
	assert.Equal(t, 5, n)
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		assert.Equal(t, 5, tx.Bucket(bucketOffers).Stats().KeyN)
		return nil
	}))
}

func TestOfferStoreClosed(t *testing.T) {
	s, err := OpenOffers(filepath.Join(t.TempDir(), "offers.db"), OfferOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = s.Create(context.Background(), replay.OfferRecord{Hop: "h", To: "t", Digest: digest("x")})
	assert.ErrorIs(t, err, replay.ErrUnavailable)
	_, _, err = s.Get(context.Background(), "h")
	assert.ErrorIs(t, err, replay.ErrUnavailable)
}

// TestIssuerCountsOfAnEarlierFile: a file written before the per-issuer
// counts existed has them built when opened, so that its records count
// against their issuers' shares.
func TestIssuerCountsOfAnEarlierFile(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t, Options{ReclaimEvery: -1})
	path := s.Path()
	for i := range 3 {
		_, ok, err := s.Remember(ctx, replay.Key{Iss: "x", Hop: fmt.Sprint(i)}, replay.Record{Digest: digest(fmt.Sprint(i))})
		require.NoError(t, err)
		require.True(t, ok)
	}
	require.NoError(t, s.Close())
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketIssuers) }))
	require.NoError(t, db.Close())

	s, err = Open(path, Options{MaxPerIssuer: 3, ReclaimEvery: -1})
	require.NoError(t, err)
	defer s.Close()
	_, _, err = s.Remember(ctx, replay.Key{Iss: "x", Hop: "3"}, replay.Record{Digest: digest("3")})
	require.ErrorIs(t, err, replay.ErrIssuerFull)
	_, ok, err := s.Remember(ctx, replay.Key{Iss: "y", Hop: "3"}, replay.Record{Digest: digest("3")})
	require.NoError(t, err)
	assert.True(t, ok)
}

// TestOfferCountOfAnEarlierFile: a file of offer records written before
// the cap existed has its count built when opened, so that its records
// count against the cap, and the count follows creates, expiries and
// deletes across a reopen.
func TestOfferCountOfAnEarlierFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "offers.db")
	s, err := OpenOffers(path, OfferOptions{})
	require.NoError(t, err)
	for i := range 3 {
		_, err := s.Create(ctx, replay.OfferRecord{Hop: fmt.Sprint(i), To: "t", Digest: digest(fmt.Sprint(i)), Open: true})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketOfferMeta) }))
	require.NoError(t, db.Close())

	s, err = OpenOffers(path, OfferOptions{MaxRecords: 3})
	require.NoError(t, err)
	_, err = s.Create(ctx, replay.OfferRecord{Hop: "3", To: "t", Digest: digest("3"), Open: true})
	var full *replay.OffersFullError
	require.ErrorAs(t, err, &full)
	assert.Equal(t, 3, full.Cap)
	held, ok, err := s.Get(ctx, "0")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Delete(ctx, "0", held.Version))
	require.NoError(t, s.Close())

	s, err = OpenOffers(path, OfferOptions{MaxRecords: 3})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Create(ctx, replay.OfferRecord{Hop: "3", To: "t", Digest: digest("3"), Open: true})
	require.NoError(t, err, "the delete made room, across a reopen")
	_, err = s.Create(ctx, replay.OfferRecord{Hop: "4", To: "t", Digest: digest("4"), Open: true})
	require.ErrorAs(t, err, &full)
}
