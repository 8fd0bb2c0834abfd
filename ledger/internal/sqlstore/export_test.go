package sqlstore

// RecoverQuery is the recovery sweep's query, for plan tests.
const RecoverQuery = recoverQuery
