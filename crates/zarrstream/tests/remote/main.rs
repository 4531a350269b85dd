//! Object stores: the Garage S3 harness itself (from the testkit) and the writer's
//! object-store destinations against it. Linux only (Garage runs as child processes).

mod garage_harness;
mod s3;
