package archive

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gowebpki/jcs"
)

// Manifest lists a run's files with their digests and operation counts.
type Manifest struct {
	Format      int            `json:"format"`
	Run         int            `json:"run"`
	CreatedAt   time.Time      `json:"created_at"`
	EndedBefore time.Time      `json:"ended_before"`
	Checkpoint  string         `json:"checkpoint"`
	Files       []ManifestFile `json:"files"`
}

// ManifestFile is one archive file: its name, the lowercase hex SHA-256 of
// its bytes (compressed, as stored), its size and how many operations it
// holds.
type ManifestFile struct {
	Name       string `json:"name"`
	SHA256     string `json:"sha256"`
	Bytes      int64  `json:"bytes"`
	Operations int    `json:"operations"`
}

// Head is what the checkpoint signs of one archived operation: where it
// is, the chain head the archive holds and the digest of its line.
type Head struct {
	File         string `json:"file"`
	Line         int    `json:"line"`
	Tenant       string `json:"tenant"`
	OperationID  string `json:"operation_id"`
	OperationRef int64  `json:"operation_ref"`
	ChainHead    string `json:"chain_head"`
	LineSHA256   string `json:"line_sha256"`
}

// Checkpoint is the predicate of a run's signed statement.
type Checkpoint struct {
	Format     int       `json:"format"`
	Run        int       `json:"run"`
	CreatedAt  time.Time `json:"created_at"`
	Operations []Head    `json:"operations"`
}

// statement is the in-toto statement a checkpoint is signed as: its
// subjects are the run's files, by digest.
type statement struct {
	Type          string     `json:"_type"`
	Subject       []subject  `json:"subject"`
	PredicateType string     `json:"predicateType"`
	Predicate     Checkpoint `json:"predicate"`
}

type subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

const statementType = "https://in-toto.io/Statement/v1"

// Statement returns the canonical JSON (RFC 8785) of the in-toto
// statement that signs files and cp.
func Statement(files []ManifestFile, cp Checkpoint) ([]byte, error) {
	st := statement{Type: statementType, PredicateType: PredicateType, Predicate: cp}
	for _, f := range files {
		st.Subject = append(st.Subject, subject{Name: f.Name, Digest: map[string]string{"sha256": f.SHA256}})
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode the checkpoint: %w", err)
	}
	// Not package canon: its limit is for one call's arguments, and a
	// checkpoint of a large run is megabytes of values this package wrote.
	c, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonicalise the checkpoint: %w", err)
	}
	return c, nil
}

// readStatement reads a signed statement back: the files it names by
// digest, and its checkpoint.
func readStatement(payload []byte) (map[string]string, *Checkpoint, error) {
	var st statement
	if err := json.Unmarshal(payload, &st); err != nil {
		return nil, nil, fmt.Errorf("the checkpoint's statement is not readable: %w", err)
	}
	if st.Type != statementType || st.PredicateType != PredicateType {
		return nil, nil, fmt.Errorf("the checkpoint's statement is a %q of %q, not an archive checkpoint", st.Type, st.PredicateType)
	}
	files := map[string]string{}
	for _, s := range st.Subject {
		files[s.Name] = s.Digest["sha256"]
	}
	return files, &st.Predicate, nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
