// Command terraform-provider-aws is the schema-only stand-in for the
// hashicorp/aws provider (package schemaprovider), served over plugin
// protocol 6. Terraform runs it through a CLI configuration's dev_overrides;
// test/terraform builds it into .cache/ and writes that configuration.
package main

import (
	"fmt"
	"os"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/commitcollect/backend/test/terraform/schemaprovider"
)

func main() {
	err := tf6server.Serve(schemaprovider.ProviderAddress, func() tfprotov6.ProviderServer { return schemaprovider.New() })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
