-- +goose Up
-- signing_keys holds the Ed25519 keys that sign receipts. public_key is
-- the raw public key in unpadded base64url; sealed_private_key is the
-- private key sealed under the gateway's secrets key ring (tgs1.KEYID.DATA,
-- bound to the key's kid), NULL once the key is retired, so that a retired
-- key can never sign again while the receipts it signed still verify.
-- Older binaries never read the table, so the minimum schema version stays
-- where an earlier migration set it.
CREATE TABLE signing_keys (
    id                 INTEGER PRIMARY KEY,
    kid                text NOT NULL UNIQUE,
    algorithm          text NOT NULL,
    public_key         text NOT NULL,
    sealed_private_key text,
    created_at         integer NOT NULL,
    retired_at         integer
);

-- +goose Down
DROP TABLE signing_keys;
