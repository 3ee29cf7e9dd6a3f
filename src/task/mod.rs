//! task
