//! Server side: process watching, MaxClients sizing, config advice (issue 8). Work in progress.
#![deny(missing_docs)]
