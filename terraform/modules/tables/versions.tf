terraform {
  required_version = ">= 1.5.0"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 6.37 is the floor for global_secondary_index.key_schema that works:
      # the block shipped in 6.29, 6.32.1 fixed a perpetual diff on indexes
      # with a range key and 6.37.0 fixed a removal that dropped every index.
      version = ">= 6.37.0, < 7.0.0"
    }
  }
}
