package store

import (
	"bytes"
	"database/sql"
	"testing"
)

// The slices ownedBlob keeps are the rows' own: reading the next rows, and
// closing the result, leaves the ones kept before as they were read.
// modernc's driver copies each BLOB into a new slice; a driver that
// reused one buffer for every row would fail here, and the store's logs
// would be read wrong.
func TestOwnedBlobsOutliveTheirRows(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50)
		SELECT i, randomblob(100 + i) FROM n`)
	if err != nil {
		t.Fatal(err)
	}
	var kept, copies [][]byte
	for rows.Next() {
		var (
			i int
			b []byte
		)
		if err := rows.Scan(&i, keepBlob(&b)); err != nil {
			t.Fatal(err)
		}
		if len(b) != 100+i {
			t.Fatalf("row %d: %d bytes, want %d", i, len(b), 100+i)
		}
		kept, copies = append(kept, b), append(copies, bytes.Clone(b))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `SELECT randomblob(1000)`); err != nil {
		t.Fatal(err)
	}
	for i := range kept {
		if !bytes.Equal(kept[i], copies[i]) {
			t.Fatalf("row %d's bytes changed once later rows were read", i+1)
		}
	}
}
