package secretcheck

import "fmt"

// MissingError is a credential whose Secret does not exist in the
// company's tenant namespace.
type MissingError struct {
	// Company is the company's slug, Credential the credential's name.
	Company, Credential string
	// Namespace, Secret and Key are where the credential's key must be.
	Namespace, Secret, Key string
}

// Error names the credential and the Secret, says what it means for the
// run, and how to create the Secret.
func (e *MissingError) Error() string {
	return fmt.Sprintf("credential %s/%s: Secret %s/%s does not exist, so the egress proxy has no key to give this run's CLI; %s",
		e.Company, e.Credential, e.Namespace, e.Secret, e.Hint())
}

// Hint says how to create the Secret (the key's value goes in a file, never
// on a command line).
func (e *MissingError) Hint() string {
	return fmt.Sprintf("create it in namespace %s with key %q (kubectl -n %s create secret generic %s --from-file=%s=<file holding the key>)",
		e.Namespace, e.Key, e.Namespace, e.Secret, e.Key)
}
