package objects

import (
	"context"
	"time"
)

// Presigner is the optional power of a stage to hand out URLs that read
// one object without the stage's credentials (S3 presigned GET URLs,
// DESIGN §12). Find it with a type assertion on the Store.
//
// A URL is a secret for as long as it works: whoever holds it reads the
// object. Implementations never log it, and their errors never carry it.
type Presigner interface {
	// PresignGet returns a URL that a plain HTTP GET reads the object at
	// key with, until expires from now. It makes no request: the object
	// need not exist (a GET of the URL then fails), so the caller checks
	// that it does when that matters. An invalid key is
	// wire.ErrInvalidKey; expires must be positive and within what the
	// backend can sign (S3: 7 days).
	PresignGet(ctx context.Context, key string, expires time.Duration, o GetURLOptions) (string, error)
}

// GetURLOptions shape the response a presigned GET URL answers.
type GetURLOptions struct {
	// ContentDisposition, when set, is the response's Content-Disposition
	// header (e.g. `attachment; filename="a.mp4"`), whatever the object
	// was stored with.
	ContentDisposition string
}

// Granter is the optional power of a stage to let someone without its
// credentials upload one object through presigned URLs, part by part, or
// for a file of one part in one PUT (upload grants, DESIGN §12). The service that holds the credentials
// starts the upload, signs a URL per part bound to that part's number and
// SHA-256, checks the parts the stage holds and completes the upload;
// the uploader only PUTs bytes. Find it with a type assertion on the
// Store.
//
// URLs are secrets while they work; implementations never log them, and
// their errors never carry them.
type Granter interface {
	// GrantPartSize is the size of every part of a granted upload but the
	// last, which holds the rest (1 to GrantPartSize bytes; an empty
	// object is one empty part).
	GrantPartSize() int64
	// CreateGrant starts a multipart upload of key, whose parts the stage
	// will check against SHA-256 checksums, and returns its upload id.
	CreateGrant(ctx context.Context, key, contentType string) (uploadID string, err error)
	// PresignPart returns a URL that uploads part number (from 1) of the
	// upload with one HTTP PUT of exactly the part's bytes, and the
	// headers that PUT must carry. The URL is bound to sha256 (lowercase
	// hex): the stage refuses a body with another SHA-256. It makes no
	// request.
	PresignPart(ctx context.Context, key, uploadID string, number int32, sha256 string, expires time.Duration) (url string, headers map[string]string, err error)
	// GrantHeld checks that the stage still holds the upload, with one
	// request however many parts it has: an unknown upload is
	// ErrNotFound.
	GrantHeld(ctx context.Context, key, uploadID string) error
	// GrantParts returns the parts the stage holds for the upload, in
	// part order. An unknown upload is ErrNotFound.
	GrantParts(ctx context.Context, key, uploadID string) ([]GrantPart, error)
	// CompleteGrant publishes the object from parts (GrantParts' answer,
	// in part order) if nothing is at key yet (ErrExists otherwise).
	CompleteGrant(ctx context.Context, key, uploadID string, parts []GrantPart) (Info, error)
	// AbortGrant drops the upload and its parts.
	AbortGrant(ctx context.Context, key, uploadID string) error

	// PresignPutObject returns a URL that publishes a whole object of at
	// most GrantPartSize bytes at key with one HTTP PUT (a single-PUT
	// grant), and the headers that PUT must carry. The signed headers bind
	// sha256 (lowercase hex) as the request's checksum, so the stage
	// refuses a body with another SHA-256, and as the object's recorded
	// SHA-256 (what StatGranted answers); they bind the content type, and
	// put-if-absent: the stage refuses the PUT once anything is at key, so
	// the key is written once. It makes no request.
	PresignPutObject(ctx context.Context, key, sha256, contentType string, expires time.Duration) (url string, headers map[string]string, err error)
	// StatGranted is Stat of the object at key with Info.SHA256 set to
	// the SHA-256 the stage recorded for it (its own full-object checksum
	// when it keeps one, else the x-amz-meta-sha256 metadata the lake's
	// writers and PresignPutObject set), "" when it recorded none. A
	// missing object is ErrNotFound.
	StatGranted(ctx context.Context, key string) (Info, error)
}

// GrantPart is one uploaded part of a granted upload.
type GrantPart struct {
	Number int32
	Size   int64
	// SHA256 is the lowercase hex SHA-256 the stage checked the part's
	// bytes against.
	SHA256 string
	ETag   string
}
